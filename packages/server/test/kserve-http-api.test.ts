import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { deflateSync, gzipSync } from 'node:zlib';
import type { Tensor } from '@visionserve/protocol';
import {
  decodeHttpInferResponse,
  encodeBytesElements,
  encodeHttpInferRequest,
} from '@visionserve/protocol/kserve';
import { createHttpEdge } from '../src/frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from '../src/frontends/http/start-http-server.js';
import { createKServeHttpApi, createKServeService } from '../src/frontends/kserve/index.js';
import { createInferenceStatistics } from '../src/core/inference-statistics.js';
import { createTfsRestApi } from '../src/frontends/tfs-rest/index.js';
import { findModelDirectory, listModelDirectories } from '../src/repository/model-roots.js';
import { createJsonLogger } from '../src/util/logger.js';
import { type JsonDecodePool, createJsonDecodePool } from '../src/runtime/json-decode-pool.js';
import { CLS, ECHO, HALF, LABELS, addFake, models, registry, service } from './kserve-fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { httpServerSettings } from '../src/compose/config-settings.js';

let server: StartedHttpServer;
let base: string;
let roots: string;
const logs: string[] = [];
// Every all-JSON inference body goes through a real decode thread (minBytes 0).
let jsonDecode: JsonDecodePool;
const statistics = createInferenceStatistics();

before(async () => {
  roots = await mkdtemp(join(tmpdir(), 'vs-kserve-roots-'));
  await mkdir(join(roots, 'extra', '1'), { recursive: true });
  await symlink(tmpdir(), join(roots, 'escape'));
  addFake('half', HALF);
  addFake('cls', CLS, LABELS);
  addFake('echo', ECHO);
  addFake('boom', HALF);
  addFake('slow', HALF);
  const logger = createJsonLogger({ level: 'debug', write: (line) => logs.push(line) });
  jsonDecode = createJsonDecodePool({ threads: 1, minBytes: 0, maxWaitMs: 60_000, logger });
  const kserve = createKServeService({
    service,
    registry,
    statistics,
    roots: { list: () => listModelDirectories([roots]), resolve: (n) => findModelDirectory([roots], n) },
    modelControl: 'explicit',
    dynamicBatching: DEFAULTS.enableBatching,
    serverVersion: '9.9.9',
    maxBatchSize: 8,
    instanceCount: 2,
    logger,
  });
  server = await startHttpServer({
    ...httpServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    edge: createHttpEdge({
      apis: [
        createTfsRestApi({ service, bodyLimitBytes: 1 << 20, requestTimeoutMs: 30_000 }),
        createKServeHttpApi({
          kserve,
          bodyLimitBytes: 1 << 20,
          decompressedBodyLimitBytes: 4 << 20,
          requestTimeoutMs: 500,
          jsonDecode,
        }),
      ],
      logger,
      notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
    }),
  });
  base = `http://127.0.0.1:${server.port}`;
});
after(async () => {
  await server.close(0);
  await jsonDecode.close();
  await rm(roots, { recursive: true, force: true });
});

interface Reply {
  status: number;
  headers: Headers;
  bytes: Uint8Array;
  json: unknown;
}

async function call(
  method: string,
  path: string,
  body?: string | Uint8Array,
  headers: Record<string, string> = {},
): Promise<Reply> {
  // fetch asks for gzip by default and decompresses transparently; ask for identity unless a test says otherwise.
  const all = { 'Accept-Encoding': 'identity', ...headers };
  const res = await fetch(`${base}${path}`, {
    method,
    headers: all,
    ...(body !== undefined ? { body } : {}),
  });
  const bytes = new Uint8Array(await res.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, bytes, json };
}

async function expectError(p: Promise<Reply>, status: number, pattern: RegExp): Promise<Reply> {
  const r = await p;
  assert.equal(r.status, status, new TextDecoder().decode(r.bytes));
  const error = (r.json as { error?: unknown } | undefined)?.error;
  assert.equal(typeof error, 'string', new TextDecoder().decode(r.bytes));
  assert.match(error as string, pattern);
  return r;
}

/** Sends an encoded request (binary parts appended) and decodes the answer. */
async function infer(
  path: string,
  init: Parameters<typeof encodeHttpInferRequest>[0],
  headers: Record<string, string> = {},
): Promise<Reply & { result?: ReturnType<typeof decodeHttpInferResponse> }> {
  const encoded = encodeHttpInferRequest(init);
  const body = Buffer.concat([encoded.json, ...encoded.binary]);
  const h: Record<string, string> = { ...headers };
  if (encoded.binaryBytes > 0) h['Inference-Header-Content-Length'] = String(encoded.json.byteLength);
  const r = await call('POST', path, body, h);
  if (r.status !== 200) return r;
  // (fetch has already undone any Content-Encoding.)
  return {
    ...r,
    result: decodeHttpInferResponse(r.bytes, r.headers.get('inference-header-content-length') ?? undefined),
  };
}

const f32 = (...v: number[]): Tensor => ({ dtype: 'float32', shape: [v.length], data: Float32Array.from(v) });
const text = (t: Tensor): string[] => (t.data as Uint8Array[]).map((b) => new TextDecoder().decode(b));

void describe('KServe v2 HTTP API (fakes)', () => {
  void it('answers health, server metadata and model metadata', async () => {
    assert.deepEqual((await call('GET', '/v2/health/live')).json, { live: true });
    assert.deepEqual((await call('GET', '/v2/health/ready')).json, { ready: true });
    const meta = (await call('GET', '/v2')).json as { name: string; version: string; extensions: string[] };
    assert.equal(meta.version, '9.9.9');
    assert.ok(meta.extensions.includes('binary_tensor_data') && meta.extensions.includes('statistics'));
    assert.deepEqual((await call('GET', '/v2/models/cls')).json, {
      name: 'cls',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
      outputs: [{ name: 'scores', datatype: 'FP32', shape: [-1, 4] }],
    });
    assert.deepEqual(
      ((await call('GET', '/v2/models/cls/versions/1')).json as { versions: string[] }).versions,
      ['1'],
    );
    assert.equal((await call('GET', '/v2/models/cls/ready')).status, 200);
    assert.equal((await call('GET', '/v2/models/cls/versions/1/ready')).status, 200);
    await expectError(call('GET', '/v2/models/nope/ready'), 404, /nope/);
    // Triton's words (model_repository_manager.cc, model_lifecycle.cc).
    await expectError(
      call('GET', '/v2/models/nope'),
      404,
      /^Request for unknown model: 'nope' is not found$/,
    );
    await expectError(
      call('GET', '/v2/models/cls/versions/7'),
      404,
      /^Request for unknown model: 'cls' version 7 is not found$/,
    );
    await expectError(call('GET', '/v2/models/cls/versions/abc'), 404, /^Not Found$/);
    // A version that exists but is still loading: 503 (Triton's UNAVAILABLE), not 404.
    await expectError(
      call('GET', '/v2/models/cls/versions/2'),
      503,
      /^Request for unknown model: 'cls' version 2 is not at ready state$/,
    );
    await expectError(
      call('POST', '/v2/models/cls/versions/2/infer', '{"inputs":[]}'),
      503,
      /not at ready state/,
    );
    await expectError(call('GET', '/v2/models/cls/versions/2/ready'), 400, /not ready/);
    await expectError(call('GET', '/v2/nothing/here'), 404, /^Not Found$/);
    const r = await expectError(call('POST', '/v2/models/cls'), 405, /Method Not Allowed/);
    assert.equal(r.headers.get('allow'), 'GET');
    // TF Serving's API keeps its own answers on the same listener.
    await expectError(call('GET', '/v3/x'), 404, /No handler for GET \/v3\/x/);
  });

  void it('reports the model configuration as Triton prints it', async () => {
    const cls = (await call('GET', '/v2/models/cls/config')).json as Record<string, unknown>;
    assert.equal(cls['max_batch_size'], 8);
    assert.deepEqual(cls['input'], [
      {
        name: 'x',
        data_type: 'TYPE_FP32',
        format: 'FORMAT_NONE',
        dims: [4],
        is_shape_tensor: false,
        optional: false,
      },
    ]);
    assert.deepEqual(cls['output'], [
      {
        name: 'scores',
        data_type: 'TYPE_FP32',
        dims: [4],
        label_filename: 'labels.txt',
        is_shape_tensor: false,
      },
    ]);
    assert.equal(cls['model_transaction_policy'], undefined);
    const half = (await call('GET', '/v2/models/half/config')).json as Record<string, unknown>;
    assert.equal(half['max_batch_size'], 0, 'rank-1 tensors do not batch');
    assert.deepEqual((half['input'] as { dims: number[] }[])[0]!.dims, [-1]);
    const echo = (await call('GET', '/v2/models/echo/config')).json as { input: { data_type: string }[] };
    assert.deepEqual(
      echo.input.map((i) => i.data_type),
      ['TYPE_BOOL', 'TYPE_STRING', 'TYPE_FP16', 'TYPE_UINT64'],
    );
  });

  void it('infers with JSON in and out, echoing the id, in one scoped core call', async () => {
    const before = { ...service.calls };
    const r = await call(
      'POST',
      '/v2/models/half/infer',
      JSON.stringify({ id: 'q1', inputs: [{ name: 'x', shape: [3], datatype: 'FP32', data: [1, 2, 5] }] }),
    );
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'application/json');
    assert.equal(r.headers.get('inference-header-content-length'), null);
    assert.deepEqual(r.json, {
      model_name: 'half',
      model_version: '1',
      id: 'q1',
      outputs: [{ name: 'y', datatype: 'FP32', shape: [3], data: [2.5, 3, 4.5] }],
    });
    assert.equal(service.calls.withServable - before.withServable, 1);
    assert.equal(service.calls.admit - before.admit, 0, 'admitted on the pinned version, not re-acquired');
    assert.equal(service.calls.servableAdmit - before.servableAdmit, 1);
  });

  void it('reads big JSON data on a decode thread into the same values, and sheds on its backlog with 503', async () => {
    const x = Float32Array.from({ length: 20_000 }, (_, i) => Math.fround(Math.sin(i) * 3));
    // As tritonclient.http writes float32 data: the float64 repr of each value.
    const body = `{"inputs":[{"name":"x","shape":[${x.length}],"datatype":"FP32","data":[${Array.from(x, String).join(', ')}]}]}`;
    const offThread = jsonDecode.counts.offThread;
    const r = await call('POST', '/v2/models/half/infer', body);
    assert.equal(r.status, 200, new TextDecoder().decode(r.bytes));
    assert.equal(jsonDecode.counts.offThread, offThread + 1);
    const y = (r.json as { outputs: [{ data: number[] }] }).outputs[0].data;
    assert.equal(y.length, x.length);
    for (let i = 0; i < x.length; i++) {
      if (!Object.is(Math.fround(y[i]!), Math.fround(x[i]! / 2 + 2))) assert.fail(`element ${i}`);
    }
    // A backlog far over maxWaitMs: refused before the body is read, as TF Serving REST is.
    const held = jsonDecode.admit(1e12);
    try {
      await expectError(call('POST', '/v2/models/half/infer', body), 503, /overloaded/);
      // Binary requests do not join the JSON decode backlog.
      const binary = await infer('/v2/models/half/infer', {
        inputs: [{ name: 'x', tensor: f32(1, 2), binary: true }],
      });
      assert.equal(binary.status, 200);
    } finally {
      held.release();
    }
    assert.equal((await call('POST', '/v2/models/half/infer', body)).status, 200);
  });

  void it('infers with binary data both ways, per output or for all outputs', async () => {
    const r = await infer('/v2/models/half/versions/1/infer', {
      inputs: [{ name: 'x', tensor: f32(1, 2), binary: true }],
      outputs: [{ name: 'y', binary: true }],
    });
    assert.equal(r.headers.get('content-type'), 'application/octet-stream');
    assert.deepEqual([...(r.result!.outputs[0]!.tensor.data as Float32Array)], [2.5, 3]);
    const all = await infer('/v2/models/half/infer', {
      inputs: [{ name: 'x', tensor: f32(4), binary: false }],
      binaryOutput: true,
    });
    assert.ok(all.headers.get('inference-header-content-length') !== null);
    assert.deepEqual([...(all.result!.outputs[0]!.tensor.data as Float32Array)], [4]);
  });

  void it('round-trips BOOL, BYTES, FP16 and UINT64 in JSON and binary', async () => {
    const tensors: Record<string, Tensor> = {
      b: { dtype: 'bool', shape: [3], data: Uint8Array.of(1, 0, 1) },
      s: {
        dtype: 'string',
        shape: [3],
        data: ['', 'abc', 'h\u00e9llo'].map((v) => new TextEncoder().encode(v)),
      },
      h: { dtype: 'float16', shape: [2], data: Uint16Array.of(0x3c00, 0xc100) },
      l: { dtype: 'uint64', shape: [1], data: BigUint64Array.of(2n ** 63n + 5n) },
    };
    for (const binary of [true, false]) {
      const r = await infer('/v2/models/echo/infer', {
        inputs: Object.entries(tensors).map(([name, tensor]) => ({
          name,
          tensor: name === 'l' && !binary ? { ...tensor, data: BigUint64Array.of(12345n) } : tensor,
          binary,
        })),
        outputs: ['b_out', 's_out', 'h_out', 'l_out'].map((name) => ({ name, binary })),
      });
      assert.equal(r.status, 200, new TextDecoder().decode(r.bytes));
      const out = Object.fromEntries(r.result!.outputs.map((o) => [o.name, o.tensor]));
      assert.deepEqual([...(out['b_out']!.data as Uint8Array)], [1, 0, 1]);
      assert.equal(out['b_out']!.dtype, 'bool');
      assert.deepEqual(text(out['s_out']!), ['', 'abc', 'h\u00e9llo']);
      assert.deepEqual([...(out['h_out']!.data as Uint16Array)], [0x3c00, 0xc100]);
      assert.deepEqual([...(out['l_out']!.data as BigUint64Array)], [binary ? 2n ** 63n + 5n : 12345n]);
    }
  });

  void it('selects outputs and classifies (batched, with labels) as BYTES', async () => {
    const x: Tensor = {
      dtype: 'float32',
      shape: [2, 4],
      data: Float32Array.of(0.1, 0.9, 0.3, 0.2, 5, 1, 7, 7),
    };
    for (const binary of [true, false]) {
      const r = await infer('/v2/models/cls/infer', {
        inputs: [{ name: 'x', tensor: x, binary: true }],
        outputs: [{ name: 'scores', binary, classification: 2 }],
      });
      const t = r.result!.outputs[0]!.tensor;
      assert.deepEqual(t.shape, [2, 2]);
      assert.deepEqual(text(t), ['0.900000:1:one', '0.300000:2:two', '7.000000:2:two', '7.000000:3:three']);
    }
    await expectError(
      infer('/v2/models/cls/infer', {
        inputs: [{ name: 'x', tensor: x, binary: true }],
        outputs: [{ name: 'nope' }],
      }),
      400,
      /unexpected inference output 'nope'/,
    );
  });

  void it('answers bad requests with 400 and a clear message, and keeps serving', async () => {
    const send = (body: string, headers: Record<string, string> = {}): Promise<Reply> =>
      call('POST', '/v2/models/half/infer', body, headers);
    await expectError(send('{not json'), 400, /JSON/);
    await expectError(
      send('{"inputs":[{"name":"x","shape":[2],"datatype":"INT32","data":[1,2]}]}'),
      400,
      /^\[request id: <id_unknown>\] inference input 'x' data-type is 'INT32', but model 'half' expects 'FP32'$/,
    );
    await expectError(
      send('{"id":"r7","inputs":[{"name":"q","shape":[1],"datatype":"FP32","data":[1]}]}'),
      400,
      /^\[request id: r7\] unexpected inference input 'q' for model 'half'$/,
    );
    await expectError(
      call(
        'POST',
        '/v2/models/cls/infer',
        '{"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]}',
      ),
      400,
      /^\[request id: <id_unknown>\] unexpected shape for input 'x' for model 'cls'\. Expected \[-1,4\], got \[1,3\]\. NOTE: Setting a non-zero max_batch_size/,
    );
    await expectError(
      send(
        '{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"q","shape":[1],"datatype":"FP32","data":[1]}]}',
      ),
      400,
      /^\[request id: <id_unknown>\] expected 1 inputs but got 2 inputs for model 'half'\. Got input\(s\) \['x','q'\], but missing required input\(s\) \[\]\./,
    );
    await expectError(
      send('{"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]}'),
      400,
      /needs 3/,
    );
    await expectError(
      send(
        '{"inputs":[{"name":"x","shape":[2147483647],"datatype":"FP32","parameters":{"binary_data_size":8}}]}',
        { 'Inference-Header-Content-Length': '9999' },
      ),
      400,
      /larger than the body/,
    );
    const json =
      '{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":800}}]}';
    await expectError(
      send(`${json}12345678`, { 'Inference-Header-Content-Length': String(json.length) }),
      400,
      /runs past the end/,
    );
    await expectError(send(json, { 'Inference-Header-Content-Length': '0' }), 501, /Raw binary requests/);
    const s = encodeBytesElements([new TextEncoder().encode('ab')]);
    s[0] = 99;
    const bytesJson = `{"inputs":[{"name":"x","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":${s.byteLength}}}]}`;
    await expectError(
      call('POST', '/v2/models/half/infer', Buffer.concat([Buffer.from(bytesJson), s]), {
        'Inference-Header-Content-Length': String(bytesJson.length),
      }),
      400,
      /declares 99 bytes/,
    );
    await expectError(
      send('{"inputs":[]}', { 'Content-Encoding': 'br' }),
      501,
      /Unsupported Content-Encoding: br/,
    ).then((r) => {
      assert.equal(r.headers.get('accept-encoding'), 'gzip, deflate');
    });
    await expectError(
      call(
        'POST',
        '/v2/models/boom/infer',
        '{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}',
      ),
      500,
      /^Internal error$/,
    );
    await expectError(
      call(
        'POST',
        '/v2/models/slow/infer',
        '{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}',
      ),
      504,
      /timed out/,
    );
    await expectError(call('POST', '/v2/repository/other/index', ''), 501, /repository_name/);
    assert.equal((await call('GET', '/v2/health/live')).status, 200);
  });

  void it('decodes gzip and deflate requests, compresses responses on request, and stops gzip bombs with 413', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'x', shape: [1], datatype: 'FP32', data: [6] }] });
    for (const [encoding, compress] of [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
    ] as const) {
      const r = await infer(
        '/v2/models/half/infer',
        { inputs: [{ name: 'x', tensor: f32(6), binary: true }], binaryOutput: true },
        { 'Accept-Encoding': 'gzip' },
      );
      assert.equal(r.headers.get('content-encoding'), 'gzip');
      assert.deepEqual([...(r.result!.outputs[0]!.tensor.data as Float32Array)], [5]);
      const plain = await call('POST', '/v2/models/half/infer', compress(body), {
        'Content-Encoding': encoding,
      });
      assert.equal(plain.status, 200, encoding);
      assert.deepEqual((plain.json as { outputs: { data: number[] }[] }).outputs[0]!.data, [5]);
    }
    const bomb = gzipSync(Buffer.alloc(16 << 20));
    await expectError(
      call('POST', '/v2/models/half/infer', bomb, { 'Content-Encoding': 'gzip' }),
      413,
      /Decompressed request body exceeds/,
    );
    await expectError(
      call('POST', '/v2/models/half/infer', Buffer.from('not gzip'), { 'Content-Encoding': 'gzip' }),
      400,
      /decompress/,
    );
  });

  void it('answers statistics per version from the core recorder, every key present', async () => {
    const stat = async (): Promise<
      Record<string, { count: number; ns: number }> & { n: number; e: number; batches: unknown }
    > => {
      const json = (await call('GET', '/v2/models/cls/stats')).json as {
        model_stats: {
          version: string;
          inference_count: number;
          execution_count: number;
          inference_stats: Record<string, { count: number; ns: number }>;
          batch_stats: unknown;
        }[];
      };
      const m = json.model_stats[0]!;
      assert.equal(m.version, '1');
      return Object.assign(m.inference_stats, {
        n: m.inference_count,
        e: m.execution_count,
        batches: m.batch_stats,
      });
    };
    const before = await stat();
    // Core records (tested in inference-service.test.ts); the fake core here does not.
    const timings = { totalNs: 100, inputNs: 10, queueNs: 20, inferNs: 60, outputNs: 10 };
    statistics.recordSuccess('cls', 1, { items: 3, ...timings });
    statistics.recordSuccess('cls', 1, { items: 1, ...timings });
    statistics.recordExecution('cls', 1, { batchSize: 4, computeNs: 50 });
    statistics.recordFailure('cls', 1, 7);
    const after = await stat();
    for (const key of [
      'success',
      'fail',
      'queue',
      'compute_input',
      'compute_infer',
      'compute_output',
      'cache_hit',
      'cache_miss',
    ]) {
      assert.deepEqual(Object.keys(after[key]!).sort(), ['count', 'ns'], key);
    }
    assert.equal(after['success']!.count - before['success']!.count, 2);
    assert.equal(after['queue']!.count - before['queue']!.count, 2);
    assert.equal(after['queue']!.ns - before['queue']!.ns, 40);
    assert.equal(after['fail']!.ns - before['fail']!.ns, 7);
    assert.equal(after.n - before.n, 4);
    assert.equal(after.e - before.e, 1);
    assert.deepEqual(after.batches, [
      {
        batch_size: 4,
        compute_input: { count: 1, ns: 0 },
        compute_infer: { count: 1, ns: 50 },
        compute_output: { count: 1, ns: 0 },
      },
    ]);
    const all = (await call('GET', '/v2/models/stats')).json as { model_stats: { name: string }[] };
    assert.ok(all.model_stats.some((m) => m.name === 'half'));
    await expectError(call('GET', '/v2/models/nope/stats'), 404, /nope/);
  });

  void it('repository: index, unload, load by name from the roots, never outside them', async () => {
    const index = async (
      ready = false,
    ): Promise<{ name: string; state?: string; version?: string; reason?: string }[]> =>
      (await call('POST', '/v2/repository/index', ready ? '{"ready":true}' : '')).json as never;
    let entries = await index();
    assert.deepEqual(
      entries.find((e) => e.name === 'half'),
      { name: 'half', version: '1', state: 'READY' },
    );
    assert.deepEqual(
      entries.find((e) => e.name === 'extra'),
      { name: 'extra' },
    );
    assert.equal(
      entries.find((e) => e.name === 'escape'),
      undefined,
      'a symlink out of the roots is not a model',
    );
    await expectError(call('POST', '/v2/repository/index', '{"ready":"yes"}'), 400, /"ready"/);

    const unload = await call(
      'POST',
      '/v2/repository/models/half/unload',
      '{"parameters":{"unload_dependents":false}}',
    );
    assert.equal(unload.status, 200);
    assert.equal((await call('GET', '/v2/models/half/ready')).status, 404);
    entries = await index();
    assert.deepEqual(
      entries.find((e) => e.name === 'half'),
      { name: 'half', state: 'UNAVAILABLE', reason: 'unloaded' },
    );
    assert.equal(
      (await index(true)).find((e) => e.name === 'half'),
      undefined,
    );
    assert.equal((await call('POST', '/v2/repository/models/half/load', '{}')).status, 200);
    assert.equal((await call('GET', '/v2/models/half/ready')).status, 200);
    assert.equal(models.get('half')!.config.basePath, '/models/half', 'reloaded with its own config');

    assert.equal((await call('POST', '/v2/repository/models/extra/load')).status, 200);
    assert.equal(models.get('extra')!.config.basePath, join(roots, 'extra'));
    await expectError(call('POST', '/v2/repository/models/escape/load'), 404, /no directory of that name/);
    await expectError(call('POST', '/v2/repository/models/..%2F..%2Fetc/load'), 400, /Invalid model name/);
    await expectError(call('POST', '/v2/repository/models/ghost/load'), 404, /ghost/);
    await expectError(call('POST', '/v2/repository/models/ghost/unload'), 404, /ghost/);
    await expectError(
      call(
        'POST',
        '/v2/repository/models/x/load',
        JSON.stringify({ parameters: { config: '{}', 'file:1/model.onnx': 'AAAA' } }),
      ),
      501,
      /not supported/,
    );
    await expectError(call('POST', '/v2/repository/models/x/load', '[1]'), 400, /JSON object/);
  });
});

void describe('KServe v2: model control mode none', () => {
  void it('refuses load and unload with 503 but serves the index', async () => {
    const kserve = createKServeService({
      modelControl: DEFAULTS.kserveModelControlMode,
      dynamicBatching: DEFAULTS.enableBatching,
      service,
      registry,
      statistics,
      serverVersion: '1',
      maxBatchSize: 1,
      instanceCount: 1,
      logger: createJsonLogger({ level: 'silent' }),
    });
    const s = await startHttpServer({
      ...httpServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      edge: createHttpEdge({
        apis: [createKServeHttpApi({ kserve, bodyLimitBytes: 1024, requestTimeoutMs: 0 })],
        logger: createJsonLogger({ level: 'silent' }),
        notFoundMessage: () => 'Not Found',
      }),
    });
    try {
      const at = `http://127.0.0.1:${s.port}`;
      const load = await fetch(`${at}/v2/repository/models/half/load`, { method: 'POST' });
      assert.equal(load.status, 503);
      assert.match(((await load.json()) as { error: string }).error, /--kserve_model_control_mode=explicit/);
      assert.equal((await fetch(`${at}/v2/repository/models/half/unload`, { method: 'POST' })).status, 503);
      assert.equal((await fetch(`${at}/v2/repository/index`, { method: 'POST' })).status, 200);
    } finally {
      await s.close(0);
    }
  });

  void it('gave back the shared memory lent to every JSON body, answered or refused', () => {
    // minBytes 0: every identity JSON infer body above (bad ones included) was read into a slot.
    assert.ok(jsonDecode.bodySlots().keptBytes > 0);
    assert.equal(jsonDecode.bodySlots().lent, 0);
  });
});
