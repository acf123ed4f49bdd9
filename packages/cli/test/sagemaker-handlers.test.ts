import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { request, writeHandler } from './helpers/sagemaker-models.js';

const attrs = (model: string, extra = ''): Record<string, string> => ({
  'X-Amzn-SageMaker-Custom-Attributes': `tfs-model-name=${model}${extra}`,
});

/** Handler modules, one model each (all serve half_plus_two: y = 0.5 x + 2). */
const HANDLERS: Record<string, { file: string; source: (outside: string) => string }> = {
  // inputHandler + outputHandler, ESM: CSV in, CSV out, through the model server step.
  pair: {
    file: 'inference.mjs',
    source: () => `
export async function inputHandler(data, context) {
  const values = data.toString('utf8').trim().split(',').map(Number);
  return JSON.stringify({ instances: values });
}
export async function outputHandler(response, context) {
  if (response.status !== 200) throw new Error('model server said ' + response.status + ': ' + response.text());
  return [response.json().predictions.join(','), 'text/csv'];
}
`,
  },
  // snake_case names, CommonJS; an object returned by input_handler is sent as JSON.
  snake: {
    file: 'inference.js',
    source: () => `
exports.input_handler = (data, context) => ({ instances: JSON.parse(data.toString()).values });
exports.output_handler = (response, context) => [
  JSON.stringify({ status: response.status, body: response.json(), type: response.headers['content-type'] }),
  'application/json',
];
`,
  },
  // handler(data, context) doing its own in-process predict; echoes the context.
  inproc: {
    file: 'inference.js',
    source: () => `
module.exports = {
  async handler(data, context) {
    const values = JSON.parse(data.toString());
    const out = await context.predict({ x: { dtype: 'float32', shape: [values.length], data: Float32Array.from(values) } });
    const { predict, ...facts } = context;
    return [JSON.stringify({ y: Array.from(out.y.data), shape: out.y.shape, dtype: out.y.dtype, context: facts }), 'application/json'];
  },
};
`,
  },
  // handler calling TF Serving REST at context.restUri.
  rest: {
    file: 'inference.mjs',
    source: () => `
export async function handler(data, context) {
  const res = await fetch(context.restUri, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ instances: JSON.parse(data.toString()) }),
  });
  return [await res.text(), 'application/json'];
}
`,
  },
  // handler calling TF Serving gRPC Predict on context.grpcPort (the project's http2 channel).
  grpc: {
    file: 'inference.mjs',
    source: () => `
import { create, toBinary, fromBinary } from '${import.meta.resolve('@bufbuild/protobuf')}';
import { createGrpcChannel } from '${import.meta.resolve('@visionserve/client')}';
import { tensorToProto, tensorFromProto, PredictRequestSchema, PredictResponseSchema } from '${import.meta.resolve('@visionserve/protocol/tfs-proto')}';

export async function handler(data, context) {
  const values = JSON.parse(data.toString());
  const channel = createGrpcChannel({ address: '127.0.0.1:' + context.grpcPort });
  try {
    const req = create(PredictRequestSchema, { modelSpec: { name: context.modelName } });
    req.inputs.x = tensorToProto({ dtype: 'float32', shape: [values.length], data: Float32Array.from(values) }, { asTensorContent: true });
    const bytes = await channel.unary('/tensorflow.serving.PredictionService/Predict', toBinary(PredictRequestSchema, req));
    const y = tensorFromProto(fromBinary(PredictResponseSchema, bytes).outputs.y, 'y');
    return [JSON.stringify({ via: 'grpc', y: Array.from(y.data) }), 'application/json'];
  } finally {
    channel.close();
  }
}
`,
  },
  throws: {
    file: 'inference.mjs',
    source: () => `export function handler() { throw new Error('boom from handler'); }`,
  },
  none: { file: 'inference.mjs', source: () => `export const notAHandler = 1;` },
  // Busy-waits for the number of milliseconds in the body (blocks its thread, not the server).
  spin: {
    file: 'inference.mjs',
    source: () => `
export function handler(data) {
  const ms = Number(data.toString());
  const end = Date.now() + ms;
  while (Date.now() < end) {}
  return [JSON.stringify({ spun: ms }), 'application/json'];
}
`,
  },
};

function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

describe('SageMaker endpoint with user handler code (code/inference.js)', () => {
  let h: Harness;
  let url: string;
  let outsideMarker: string;
  before(async () => {
    const root = await tempRepo('vs-sm-handlers-');
    const outside = await tempRepo('vs-sm-outside-');
    outsideMarker = join(outside, 'executed');
    // A module outside every model dir; importing it would leave a marker file.
    const evil = `import { writeFileSync } from 'node:fs';
writeFileSync(${JSON.stringify(outsideMarker)}, 'x');
export function handler() { return ['{"escaped":true}', 'application/json']; }
`;
    await writeFile(join(outside, 'inference.mjs'), evil);
    await mkdir(join(outside, 'code'));
    await writeFile(join(outside, 'code', 'inference.mjs'), evil);
    const names: string[] = [];
    for (const [name, { file, source }] of Object.entries(HANDLERS)) {
      const base = await placeModel(root, name, 1, halfPlusTwoModel());
      await writeHandler(base, file, source(outside));
      names.push(name);
    }
    // code/inference.mjs symlinked out of the model dir, and a code/ dir symlinked out.
    const escapeFile = await placeModel(root, 'escape_file', 1, halfPlusTwoModel());
    await mkdir(join(escapeFile, 'code'));
    await symlink(join(outside, 'inference.mjs'), join(escapeFile, 'code', 'inference.mjs'));
    const escapeDir = await placeModel(root, 'escape_dir', 1, halfPlusTwoModel());
    await symlink(join(outside, 'code'), join(escapeDir, 'code'));
    names.push('escape_file', 'escape_dir');
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list { ${names.map((n) => `config { name: '${n}' base_path: '${n}' }`).join(' ')} }`,
    );
    h = await startHarness({
      modelConfigFile: config,
      // The escape models never load; without this the server would refuse to start (as TF Serving).
      waitForModels: true,
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      instances: 1,
      sagemakerRequestTimeoutMs: 4000,
    });
    url = h.sagemaker;
  });
  after(async () => {
    await h.close();
  });

  const invoke = (model: string, body: string, headers: Record<string, string> = {}) =>
    request(`${url}/invocations`, {
      body,
      headers: { 'Content-Type': 'text/csv', ...attrs(model), ...headers },
    });

  it('inputHandler + outputHandler (ESM): request body -> model server -> response', async () => {
    const res = await invoke('pair', '1,2,5');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.contentType, 'text/csv');
    assert.equal(res.text, '2.5,3,4.5');
  });

  it('input_handler + output_handler (snake_case, CommonJS); the model server answer carries its status', async () => {
    const ok = await invoke('snake', '{"values": [2, 4]}', { 'Content-Type': 'application/json' });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json(), { status: 200, body: { predictions: [3, 4] }, type: 'application/json' });
    // The output handler sees the model server's error, as in the container.
    const bad = await invoke('snake', '{"values": ["a"]}', { 'Content-Type': 'application/json' });
    assert.equal(bad.status, 200);
    const body = bad.json() as { status: number; body: { error: string } };
    assert.equal(body.status, 400);
    assert.match(body.body.error, /./);
  });

  it('handler(data, context) with in-process context.predict; context carries the request facts', async () => {
    const res = await invoke('inproc', '[1, 2, 5]', {
      'Content-Type': 'application/json',
      Accept: 'application/json',
      ...attrs('inproc', ',tfs-model-version=1,tfs-method=predict,other=1'),
    });
    assert.equal(res.status, 200, res.text);
    const body = res.json() as {
      y: number[];
      shape: number[];
      dtype: string;
      context: Record<string, unknown>;
    };
    assert.deepEqual(body.y, [2.5, 3, 4.5]);
    assert.deepEqual(body.shape, [3]);
    assert.equal(body.dtype, 'float32');
    const rest = h.rest.replace('http://', '');
    assert.deepEqual(body.context, {
      modelName: 'inproc',
      modelVersion: '1',
      method: 'predict',
      restUri: `http://${rest}/v1/models/inproc/versions/1:predict`,
      grpcPort: h.server.ports.grpc,
      customAttributes: 'tfs-model-name=inproc,tfs-model-version=1,tfs-method=predict,other=1',
      requestContentType: 'application/json',
      acceptHeader: 'application/json',
      contentLength: 9,
    });
  });

  it('a handler may call TF Serving REST at context.restUri', async () => {
    const res = await invoke('rest', '[1, 3]');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json(), { predictions: [2.5, 3.5] });
  });

  it('a handler may call TF Serving gRPC Predict on context.grpcPort', async () => {
    const res = await invoke('grpc', '[4, 6]');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json(), { via: 'grpc', y: [4, 5] });
  });

  it('a throwing handler is 500 {"error": message}; a module without handlers is 500', async () => {
    const res = await invoke('throws', '1');
    assert.equal(res.status, 500);
    assert.deepEqual(res.json(), { error: 'boom from handler' });
    const none = await invoke('none', '1');
    assert.equal(none.status, 500);
    assert.match((none.json() as { error: string }).error, /exports neither handler/);
  });

  it('refuses handler modules reached through symlinks out of the model directory', async () => {
    for (const model of ['escape_file', 'escape_dir']) {
      // The handler is an asset of the version: the version fails to load, with the reason in its status.
      const res = await invoke(model, '1');
      assert.equal(res.status, 404, res.text);
      const status = await request(`${h.rest}/v1/models/${model}`);
      const versions = (
        status.json() as {
          model_version_status: { state: string; status: { error_code: string; error_message: string } }[];
        }
      ).model_version_status;
      assert.equal(versions[0]!.state, 'END');
      assert.equal(versions[0]!.status.error_code, 'PERMISSION_DENIED');
      assert.match(versions[0]!.status.error_message, /outside the model directory/);
    }
    assert.equal(existsSync(outsideMarker), false, 'the outside module must never be imported');
  });

  it('a handler spinning for seconds does not stall /ping or other requests (measured)', async () => {
    const spinning = invoke('spin', '2500');
    await new Promise((r) => setTimeout(r, 100)); // let the handler start spinning
    const latencies: number[] = [];
    const started = performance.now();
    while (performance.now() - started < 1800) {
      const t0 = performance.now();
      const ping = await request(`${url}/ping`);
      latencies.push(performance.now() - t0);
      assert.equal(ping.status, 200);
      await new Promise((r) => setTimeout(r, 10));
    }
    // Another handler request runs on the second handler worker meanwhile.
    const t0 = performance.now();
    const other = await invoke('inproc', '[1]', { 'Content-Type': 'application/json' });
    const otherMs = performance.now() - t0;
    assert.equal(other.status, 200);
    const res = await spinning;
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { spun: 2500 });
    const p99 = percentile(latencies, 99);
    console.log(
      `ping while a handler spins: n=${latencies.length} p50=${percentile(latencies, 50).toFixed(2)} ms p99=${p99.toFixed(2)} ms max=${Math.max(...latencies).toFixed(2)} ms; other handler request ${otherMs.toFixed(1)} ms`,
    );
    assert.ok(latencies.length > 20, `only ${latencies.length} pings`);
    // A blocked event loop would hold a ping for the whole 2.5 s spin; the bound leaves room for a busy CI box.
    assert.ok(p99 < 500, `ping p99 ${p99} ms`);
    assert.ok(otherMs < 2000, `other handler request took ${otherMs} ms`);
  });

  it('a handler past the request deadline is answered 504 and its worker replaced', async () => {
    const res = await invoke('spin', '60000');
    assert.equal(res.status, 504);
    assert.match((res.json() as { error: string }).error, /timed out/);
    const again = await invoke('spin', '10');
    assert.equal(again.status, 200);
    assert.deepEqual(again.json(), { spun: 10 });
  });
});
