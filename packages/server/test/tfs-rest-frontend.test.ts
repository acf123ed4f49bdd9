import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { Code, ServingError, type Tensor, notFound } from '@visionserve/protocol';
import type { InferenceService, ModelSpec, PredictRequest } from '../src/core/inference-service.js';
import type { Signature } from '../src/core/signature.js';
import { createHttpEdge } from '../src/frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from '../src/frontends/http/start-http-server.js';
import { createTfsRestApi } from '../src/frontends/tfs-rest/index.js';
import { type JsonDecodePool, createJsonDecodePool } from '../src/runtime/json-decode-pool.js';
import { type Logger, createJsonLogger } from '../src/util/logger.js';
import { NO_ASSETS, fakeInferenceService } from './fakes.js';
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { httpServerSettings } from '../src/compose/config-settings.js';

const HALF: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1] } },
  outputs: { y: { name: 'y', dtype: 'float32', shape: [-1] } },
  methodName: 'tensorflow/serving/predict',
};
const TWO: Signature = {
  inputs: {
    a: { name: 'a', dtype: 'float32', shape: [-1, 2] },
    b: { name: 'b', dtype: 'int32', shape: [-1] },
  },
  outputs: {
    sum: { name: 'sum', dtype: 'float32', shape: [-1] },
    b2: { name: 'b2', dtype: 'int64', shape: undefined },
  },
  methodName: 'tensorflow/serving/predict',
};
const STR: Signature = {
  inputs: { s: { name: 's', dtype: 'string', shape: [-1] } },
  outputs: {
    s_bytes: { name: 's_bytes', dtype: 'string', shape: [-1] },
    text: { name: 't', dtype: 'string', shape: [-1] },
  },
  methodName: 'tensorflow/serving/predict',
};
const SIGS: Record<string, Signature> = { half: HALF, two: TWO, str: STR, slow: HALF, boom: HALF };

/** A fake InferenceService; `aborts` records abort reasons seen by predict. */
function fakeService(aborts: unknown[]): InferenceService<ServableAssets> {
  const resolve = (spec: ModelSpec): { sig: Signature; version: number } => {
    const sig = SIGS[spec.name];
    if (!sig || (spec.version !== undefined && spec.version !== 1)) {
      throw notFound(
        `Servable not found for request: ${spec.version === undefined ? `Latest(${spec.name})` : `Specific(${spec.name}, ${spec.version})`}`,
      );
    }
    if (spec.label !== undefined && spec.label !== 'stable') {
      throw new ServingError(Code.INVALID_ARGUMENT, `Unrecognized servable version label: ${spec.label}`);
    }
    return { sig, version: 1 };
  };
  return fakeInferenceService<ServableAssets>({
    resolve: (spec) => {
      const { sig, version } = resolve(spec);
      return { version, signature: sig, assets: NO_ASSETS };
    },
    run(req: PredictRequest, options) {
      const { version } = resolve(req.model);
      const name = req.model.name;
      if (name === 'slow') {
        return new Promise((_, reject) => {
          options?.signal?.addEventListener('abort', () => {
            aborts.push(options.signal?.reason);
            reject(options.signal?.reason instanceof Error ? options.signal.reason : new Error('aborted'));
          });
        });
      }
      if (name === 'boom') return Promise.reject(new Error('secret /path/to/model.onnx exploded'));
      const model = { name, version, signatureName: req.model.signatureName ?? 'serving_default' };
      let outputs: Record<string, Tensor>;
      if (name === 'half') {
        const x = req.inputs['x']!;
        const y = (x.data as Float32Array).map((v) => 0.5 * v + 2);
        outputs = { y: { dtype: 'float32', shape: x.shape, data: y } };
      } else if (name === 'two') {
        const a = req.inputs['a']!.data as Float32Array;
        const b = req.inputs['b']!;
        const sum = new Float32Array(b.shape[0]!).map((_, i) => a[2 * i]! + a[2 * i + 1]!);
        outputs = {
          sum: { dtype: 'float32', shape: [sum.length], data: sum },
          b2: {
            dtype: 'int64',
            shape: b.shape,
            data: BigInt64Array.from(b.data as Int32Array, (v) => BigInt(v) * 2n ** 40n),
          },
        };
      } else {
        const s = req.inputs['s']!;
        outputs = { s_bytes: s, text: s };
      }
      return Promise.resolve({ model, outputs });
    },
    status(spec) {
      resolve(spec);
      return [
        { version: 1, state: 'AVAILABLE' },
        ...(spec.version === undefined && spec.label === undefined
          ? [{ version: 0, state: 'END' as const, error: { code: Code.NOT_FOUND, message: 'gone' } }]
          : []),
      ];
    },
    modelNames: () => Object.keys(SIGS),
  });
}

/** The REST edge with the TF Serving API, as server.ts mounts it. */
function tfsRestEdge(
  service: InferenceService<ServableAssets>,
  logger: Logger,
  limits: { bodyLimitBytes?: number; decompressedBodyLimitBytes?: number; requestTimeoutMs?: number } = {},
  jsonDecode?: JsonDecodePool,
): ReturnType<typeof createHttpEdge> {
  return createHttpEdge({
    apis: [
      createTfsRestApi({
        service,
        bodyLimitBytes: limits.bodyLimitBytes ?? 256 * 1024 * 1024,
        decompressedBodyLimitBytes: limits.decompressedBodyLimitBytes,
        requestTimeoutMs: limits.requestTimeoutMs ?? 30_000,
        jsonDecode,
      }),
    ],
    logger,
    notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
  });
}

const logs: string[] = [];
const aborts: unknown[] = [];
let server: StartedHttpServer;
let small: StartedHttpServer;
let decoding: StartedHttpServer;
let base: string;
const jsonDecode = createJsonDecodePool({
  threads: 1,
  maxWaitMs: 50,
  logger: createJsonLogger({ level: 'silent' }),
});

before(async () => {
  const logger = createJsonLogger({ level: 'debug', write: (line) => logs.push(line) });
  const service = fakeService(aborts);
  server = await startHttpServer({
    ...httpServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    edge: tfsRestEdge(service, logger),
  });
  small = await startHttpServer({
    ...httpServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    edge: tfsRestEdge(service, logger, {
      bodyLimitBytes: 1024,
      decompressedBodyLimitBytes: 4096,
      requestTimeoutMs: 200,
    }),
  });
  decoding = await startHttpServer({
    ...httpServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    edge: tfsRestEdge(service, logger, {}, jsonDecode),
  });
  base = `http://127.0.0.1:${server.port}`;
});
after(async () => {
  await server.close();
  await small.close();
  await decoding.close();
  await jsonDecode.close();
});

async function call(
  method: string,
  path: string,
  body?: string | Uint8Array,
  headers: Record<string, string> = {},
  at = base,
): Promise<{ status: number; json: unknown; text: string; type: string | null }> {
  const res = await fetch(`${at}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, type: res.headers.get('content-type') };
}
const post = (path: string, body: unknown): ReturnType<typeof call> =>
  call('POST', path, typeof body === 'string' ? body : JSON.stringify(body));

async function expectError(p: ReturnType<typeof call>, status: number, pattern: RegExp): Promise<void> {
  const r = await p;
  assert.equal(r.status, status, r.text);
  assert.equal(r.type, 'application/json');
  const err = (r.json as { error?: unknown } | undefined)?.error;
  assert.equal(typeof err, 'string', r.text);
  assert.match(err as string, pattern);
}

void describe('TF Serving REST frontend', () => {
  void it('predicts in row format', async () => {
    const r = await post('/v1/models/half:predict', { instances: [1, 2, 5] });
    assert.equal(r.status, 200);
    assert.equal(r.type, 'application/json');
    assert.deepEqual(r.json, { predictions: [2.5, 3, 4.5] });
  });

  void it('predicts in columnar format, with version, label, signature_name and mixed case', async () => {
    assert.deepEqual((await post('/v1/models/half/versions/1:predict', { inputs: [1, 2] })).json, {
      outputs: [2.5, 3],
    });
    assert.deepEqual((await post('/V1/Models/half/labels/stable:PREDICT', { inputs: { x: [4] } })).json, {
      outputs: [4],
    });
    assert.deepEqual(
      (await post('/v1/models/half:predict', { signature_name: 'serving_default', instances: [0] })).json,
      { predictions: [2] },
    );
  });

  void it('handles multi-input rows, several outputs and int64', async () => {
    const r = await post('/v1/models/two:predict', {
      instances: [
        { a: [1, 2], b: 1 },
        { a: [3, 4], b: 2 },
      ],
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, '{"predictions":[{"sum":3,"b2":1099511627776},{"sum":7,"b2":2199023255552}]}');
    const c = await post('/v1/models/two:predict', { inputs: { a: [[1, 2]], b: [3] } });
    assert.equal(c.text, '{"outputs":{"sum":[3],"b2":[3298534883328]}}');
  });

  void it('handles strings: b64 in, b64 out for *_bytes, text otherwise', async () => {
    const r = await post('/v1/models/str:predict', {
      instances: [{ b64: Buffer.from('héllo').toString('base64') }, 'plain'],
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, {
      predictions: [
        { s_bytes: { b64: Buffer.from('héllo').toString('base64') }, text: 'héllo' },
        { s_bytes: { b64: Buffer.from('plain').toString('base64') }, text: 'plain' },
      ],
    });
    await expectError(
      post('/v1/models/str:predict', { instances: [{ b64: 'not base64!' }] }),
      400,
      /Unable to base64 decode/,
    );
  });

  void it('returns model status as proto3 JSON', async () => {
    const r = await call('GET', '/v1/models/half');
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, {
      model_version_status: [
        { version: '1', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } },
        { version: '0', state: 'END', status: { error_code: 'NOT_FOUND', error_message: 'gone' } },
      ],
    });
    assert.equal(
      ((await call('GET', '/v1/models/half/versions/1')).json as { model_version_status: unknown[] })
        .model_version_status.length,
      1,
    );
    assert.equal((await call('GET', '/v1/models/h%61lf/labels/stable')).status, 200);
  });

  void it('returns metadata in the TF Serving shape', async () => {
    const r = await call('GET', '/v1/models/two/metadata');
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, {
      model_spec: { name: 'two', signature_name: '', version: '1' },
      metadata: {
        signature_def: {
          signature_def: {
            serving_default: {
              inputs: {
                a: {
                  name: 'a',
                  dtype: 'DT_FLOAT',
                  tensor_shape: {
                    dim: [
                      { size: '-1', name: '' },
                      { size: '2', name: '' },
                    ],
                    unknown_rank: false,
                  },
                },
                b: {
                  name: 'b',
                  dtype: 'DT_INT32',
                  tensor_shape: { dim: [{ size: '-1', name: '' }], unknown_rank: false },
                },
              },
              outputs: {
                sum: {
                  name: 'sum',
                  dtype: 'DT_FLOAT',
                  tensor_shape: { dim: [{ size: '-1', name: '' }], unknown_rank: false },
                },
                b2: { name: 'b2', dtype: 'DT_INT64', tensor_shape: { dim: [], unknown_rank: true } },
              },
              method_name: 'tensorflow/serving/predict',
            },
          },
        },
      },
    });
  });

  void it('maps path errors to TF Serving statuses and messages', async () => {
    await expectError(call('GET', '/v1/models'), 400, /^Missing model name in request\.$/);
    await expectError(call('GET', '/v1/models/half/versions/1/labels/x'), 400, /^Malformed request: GET/);
    await expectError(
      call('GET', '/v1/models/nope'),
      404,
      /^Servable not found for request: Latest\(nope\)$/,
    );
    await expectError(call('GET', '/v1/models/half/versions/3'), 404, /Specific\(half, 3\)/);
    await expectError(
      call('GET', '/v1/models/half/labels/canary'),
      400,
      /^Unrecognized servable version label: canary$/,
    );
    await expectError(
      post('/v1/models/half/versions/x:predict', { instances: [1] }),
      400,
      /Malformed request/,
    );
    await expectError(
      call('GET', '/v1/models/half/versions/99999999999999999999'),
      400,
      /Failed to convert version/,
    );
    await expectError(
      post('/v1/models/half:classify', { examples: [] }),
      400,
      /'examples' value is an empty array/,
    );
    await expectError(
      post('/v1/models/half:regress', {}),
      400,
      /key 'examples' is expected and was not found/,
    );
    await expectError(call('GET', '/v2/health/ready'), 404, /No handler/);
    await expectError(call('GET', '/'), 404, /No handler/);
    await expectError(call('PUT', '/v1/models/half'), 400, /Malformed request: PUT/);
  });

  void it('gives TF Serving messages for bad predict bodies', async () => {
    await expectError(
      post('/v1/models/half:predict', { instances: [1], inputs: [1] }),
      400,
      /^Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist$/,
    );
    await expectError(post('/v1/models/half:predict', {}), 400, /^Missing 'inputs' or 'instances' key$/);
    await expectError(post('/v1/models/half:predict', { instances: [] }), 400, /empty/);
    await expectError(
      post('/v1/models/half:predict', { signature_name: 'nope', instances: [1] }),
      400,
      /^Serving signature name: "nope" not found in signature def$/,
    );
    await expectError(post('/v1/models/nope:predict', { instances: [1] }), 404, /Latest\(nope\)/);
    await expectError(post('/v1/models/half:predict', { instances: [[1, 2], [3]] }), 400, /unexpected size/);
    await expectError(post('/v1/models/half:predict', { inputs: { y: [1] } }), 400, /"y" not found/);
    await expectError(
      post('/v1/models/two:predict', { instances: [{ a: [1, 2], b: 1 }, { a: [1, 2] }] }),
      400,
      /same keys/,
    );
    await expectError(
      post('/v1/models/two:predict', { instances: [{ a: [1, 2], b: 1.5 }] }),
      400,
      /type: int32/,
    );
  });

  void it('survives hostile bodies and keeps serving', async () => {
    await expectError(post('/v1/models/half:predict', '{"instances": [1, 2'), 400, /JSON Parse error/);
    await expectError(post('/v1/models/half:predict', 'not json'), 400, /JSON Parse error/);
    await expectError(post('/v1/models/half:predict', '"just a string"'), 400, /JSON object/);
    const deep = `{"instances": ${'['.repeat(100_000)}1${']'.repeat(100_000)}}`;
    await expectError(post('/v1/models/half:predict', deep), 400, /deeper than/);
    const deepObj = `{"instances": [${'{"x":'.repeat(100_000)}1${'}'.repeat(100_000)}]}`;
    await expectError(post('/v1/models/half:predict', deepObj), 400, /not formatted/);
    assert.deepEqual((await post('/v1/models/half:predict', { instances: [1] })).json, {
      predictions: [2.5],
    });
  });

  void it('turns unknown internal errors into 500 "Internal error" and logs them', async () => {
    const r = await post('/v1/models/boom:predict', { instances: [1] });
    assert.equal(r.status, 500);
    assert.deepEqual(r.json, { error: 'Internal error' });
    assert.ok(logs.some((l) => l.includes('exploded')));
  });

  void it('accepts gzip bodies and refuses bad or oversized ones', async () => {
    const gz = gzipSync(JSON.stringify({ instances: [1, 2, 5] }));
    const r = await call('POST', '/v1/models/half:predict', gz, { 'Content-Encoding': 'gzip' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { predictions: [2.5, 3, 4.5] });
    await expectError(
      call('POST', '/v1/models/half:predict', Buffer.from('not gzip'), { 'Content-Encoding': 'gzip' }),
      400,
      /decompress/,
    );
    const bomb = gzipSync(`{"instances": [${'0,'.repeat(10_000)}0]}`);
    assert.ok(bomb.length < 1024);
    await expectError(
      call(
        'POST',
        '/v1/models/half:predict',
        bomb,
        { 'Content-Encoding': 'gzip' },
        `http://127.0.0.1:${small.port}`,
      ),
      413,
      /Decompressed request body exceeds/,
    );
  });

  void it('refuses bodies over the limit with 413 (declared and chunked)', async () => {
    const at = `http://127.0.0.1:${small.port}`;
    const big = JSON.stringify({ instances: new Array(2000).fill(1) });
    await expectError(
      call('POST', '/v1/models/half:predict', big, {}, at),
      413,
      /exceeds the limit of 1024 bytes/,
    );
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${at}/v1/models/half:predict`, { method: 'POST' }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      req.on('error', reject);
      for (let i = 0; i < 8; i++) req.write('x'.repeat(512));
      req.end();
    });
    assert.equal(chunked.status, 413);
    assert.match(chunked.body, /exceeds the limit/);
    assert.equal((await call('POST', '/v1/models/half:predict', '{"instances":[1]}', {}, at)).status, 200);
  });

  void it('aborts the call when the client disconnects', async () => {
    const before = aborts.length;
    const req = request(`${base}/v1/models/slow:predict`, { method: 'POST' });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ instances: [1] }));
    await new Promise((r) => setTimeout(r, 100));
    req.destroy();
    for (let i = 0; i < 50 && aborts.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    const reason = aborts[before];
    assert.ok(reason instanceof ServingError);
    assert.equal(reason.code, Code.CANCELLED);
    // A truncated body (client closes mid-body) does not disturb the server either.
    const trunc = request(`${base}/v1/models/half:predict`, {
      method: 'POST',
      headers: { 'Content-Length': '100' },
    });
    trunc.on('error', () => undefined);
    trunc.write('{"instances": [1');
    await new Promise((r) => setTimeout(r, 50));
    trunc.destroy();
    assert.deepEqual((await post('/v1/models/half:predict', { instances: [2] })).json, { predictions: [3] });
  });

  void it('reads big predict bodies on a decode thread and sheds by the decode backlog before reading', async () => {
    const at = `http://127.0.0.1:${decoding.port}`;
    const xs = Array.from({ length: 30_000 }, (_, i) => Math.fround(i / 7));
    const body = JSON.stringify({ instances: xs });
    assert.ok(body.length > 65_536);
    const ok = await call('POST', '/v1/models/half:predict', body, {}, at);
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(
      (ok.json as { predictions: number[] }).predictions.map(Math.fround),
      xs.map((x) => Math.fround(0.5 * x + 2)),
    );
    assert.equal(jsonDecode.counts.offThread, 1);
    // A body the fast reader does not take (a string) gets the general path's answer.
    await expectError(
      call('POST', '/v1/models/half:predict', JSON.stringify({ instances: ['x'.repeat(70_000)] }), {}, at),
      400,
      /.+/,
    );
    // A backlog of admitted bodies over 50 ms: refused with 503 from the headers alone (the
    // body is never sent), Retry-After set.
    const held = jsonDecode.admit(512 * 1024 * 1024);
    try {
      const refused = await new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
        (resolve, reject) => {
          const req = request(`${at}/v1/models/half:predict`, {
            method: 'POST',
            headers: { 'Content-Length': String(body.length), 'Content-Type': 'application/json' },
          });
          req.on('response', (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (text += c));
            res.on('end', () => {
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
              req.destroy();
            });
          });
          req.on('error', reject);
          req.flushHeaders();
        },
      );
      assert.equal(refused.status, 503);
      assert.equal(refused.headers['retry-after'], '1');
      // The body (under 16 MiB) is drained after the answer: the connection stays usable.
      assert.equal(refused.headers['connection'], 'keep-alive');
      assert.match(refused.body, /overloaded: about \d+ ms of JSON decoding queued \(limit 50 ms\)/);
    } finally {
      held.release();
    }
    assert.equal((await call('POST', '/v1/models/half:predict', body, {}, at)).status, 200);
    assert.equal(jsonDecode.counts.offThread, 3);
    // Big bodies the fast reader refuses are parsed on the decode thread too, with the
    // general path's answers: NaN tokens, row objects, hostile nesting, text that is not JSON.
    const inline = jsonDecode.counts.inline;
    const nan = `{"instances": [NaN, ${xs.join(', ')}, -Infinity]}`;
    const nanAnswer = await call('POST', '/v1/models/half:predict', nan, {}, at);
    assert.equal(nanAnswer.status, 200, nanAnswer.text);
    assert.match(nanAnswer.text, /^\{"predictions":\[NaN,2,/);
    assert.match(nanAnswer.text, /,-Infinity\]\}$/);
    const rows = JSON.stringify({ instances: xs.slice(0, 10_000).map((x) => ({ a: [x, x], b: 1 })) });
    const rowsAnswer = await call('POST', '/v1/models/two:predict', rows, {}, at);
    assert.equal(rowsAnswer.status, 200, rowsAnswer.text);
    await expectError(
      call('POST', '/v1/models/half:predict', body.slice(0, -1), {}, at),
      400,
      /JSON Parse error/,
    );
    const deep = `{"instances": ${'['.repeat(100_000)}1${']'.repeat(100_000)}}`;
    await expectError(call('POST', '/v1/models/half:predict', deep, {}, at), 400, /deeper than/);
    const deepObj = `{"instances": [${'{"x":'.repeat(100_000)}1${'}'.repeat(100_000)}]}`;
    await expectError(call('POST', '/v1/models/half:predict', deepObj, {}, at), 400, /not formatted/);
    assert.equal(jsonDecode.counts.offThread, 8);
    assert.equal(jsonDecode.counts.inline, inline);
    assert.equal(jsonDecode.bodySlots().lent, 0);
  });

  void it('lends big bodies shared memory, reuses it without stale bytes and gets it back on every path', async () => {
    const at = `http://127.0.0.1:${decoding.port}`;
    const predict = (body: string, headers: Record<string, string> = {}): ReturnType<typeof call> =>
      call('POST', '/v1/models/half:predict', body, headers, at);
    const xs = Array.from({ length: 20_000 }, (_, i) => Math.fround(i / 3));
    const ys = xs.map((x) => -x);
    const answer = (v: number[]): number[] => v.map((x) => Math.fround(0.5 * x + 2));
    const predictions = (r: { json: unknown }): number[] =>
      (r.json as { predictions: number[] }).predictions.map(Math.fround);
    // The same size class twice in a row: the second body's slot held the first one's bytes.
    for (const v of [xs, ys, xs]) {
      const r = await predict(JSON.stringify({ instances: v }));
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(predictions(r), answer(v));
      assert.equal(jsonDecode.bodySlots().lent, 0);
    }
    const kept = jsonDecode.bodySlots().keptBytes;
    assert.ok(kept > 0);
    // Concurrent bodies each get a slot of their own.
    const many = await Promise.all([xs, ys, xs, ys].map((v) => predict(JSON.stringify({ instances: v }))));
    many.forEach((r, i) => {
      // (or refused by the decode backlog's 50 ms limit)
      if (r.status === 503) return;
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(predictions(r), answer(i % 2 === 0 ? xs : ys));
    });
    assert.ok(many.some((r) => r.status === 200));
    // Errors: malformed (fast reader refuses, general path 400), shape errors, a shorter body
    // than declared, a client that leaves mid-body, a body over the limit.
    await expectError(predict(JSON.stringify({ instances: xs }).slice(0, -1)), 400, /JSON Parse error/);
    await expectError(predict(JSON.stringify({ instances: [xs, xs.slice(1)] })), 400, /.+/);
    await expectError(
      predict(JSON.stringify({ instances: xs, extra: 1 }).replace('extra', 'inputs')),
      400,
      /.+/,
    );
    const text = JSON.stringify({ instances: ys });
    await new Promise<void>((resolve) => {
      const req = request(`${at}/v1/models/half:predict`, {
        method: 'POST',
        headers: { 'Content-Length': String(text.length + 100) },
      });
      req.on('error', () => {
        resolve();
      });
      req.on('close', () => {
        resolve();
      });
      req.write(text.slice(0, 40_000));
      setTimeout(() => req.destroy(), 50);
    });
    await new Promise((r) => setTimeout(r, 100));
    // Chunked (no declared length): read into memory of its own, same answer.
    const chunked = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(`${at}/v1/models/half:predict`, { method: 'POST' });
      req.on('response', (res) => {
        let t = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (t += c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, text: t });
        });
      });
      req.on('error', reject);
      for (let i = 0; i < text.length; i += 16_384) req.write(text.slice(i, i + 16_384));
      req.end();
    });
    assert.equal(chunked.status, 200, chunked.text);
    assert.deepEqual(predictions({ json: JSON.parse(chunked.text) }), answer(ys));
    assert.equal(jsonDecode.bodySlots().lent, 0);
    // A correct body after all that still gets its own answer from reused memory.
    assert.deepEqual(predictions(await predict(text)), answer(ys));
    assert.equal(jsonDecode.bodySlots().lent, 0);
    assert.ok(jsonDecode.bodySlots().keptBytes <= 64 * 1024 * 1024);
  });

  void it('answers 504 when the request deadline passes', async () => {
    const before = aborts.length;
    const r = await call(
      'POST',
      '/v1/models/slow:predict',
      '{"instances":[1]}',
      {},
      `http://127.0.0.1:${small.port}`,
    );
    assert.equal(r.status, 504);
    assert.match((r.json as { error: string }).error, /timed out after 200 ms/);
    assert.equal((aborts[before] as ServingError).code, Code.DEADLINE_EXCEEDED);
  });
});
