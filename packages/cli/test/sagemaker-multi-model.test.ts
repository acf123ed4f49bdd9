import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { image } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { type HttpResult, placeMobilenet, request, writeHandler } from './helpers/sagemaker-models.js';

const json = { 'Content-Type': 'application/json' };

describe('SageMaker multi-model endpoint API', () => {
  let h: Harness;
  let url: string;
  let models: string;
  let outside: string;
  const load = (body: unknown): Promise<HttpResult> =>
    request(`${url}/models`, { body: typeof body === 'string' ? body : JSON.stringify(body), headers: json });

  before(async () => {
    const root = await tempRepo('vs-sm-mme-');
    models = join(root, 'models');
    await placeModel(models, 'alpha', 1, halfPlusTwoModel());
    await placeMobilenet(models, 'beta');
    await placeModel(models, 'coded', 1, halfPlusTwoModel());
    await placeModel(models, 'gamma', 1, halfPlusTwoModel());
    await placeModel(models, 'corrupt', 1, new TextEncoder().encode('not an onnx model'));
    await mkdir(join(models, 'empty'));
    const badConfig = await placeModel(models, 'badconfig', 1, halfPlusTwoModel());
    await writeFile(join(badConfig, 'visionserve.json'), '{"image": {"resize": "squash"}}');
    outside = await tempRepo('vs-sm-mme-outside-');
    await placeModel(outside, 'evil', 1, halfPlusTwoModel());
    await symlink(join(outside, 'evil'), join(models, 'link_out'));
    h = await startHarness({
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      sagemakerMultiModel: true,
      sagemakerModelRoots: [models],
      sagemakerMaxModels: 4,
      instances: 1,
    });
    url = h.sagemaker;
  });
  after(async () => {
    await h.close();
  });

  it('starts empty; /ping is 200 in multi-model mode', async () => {
    assert.deepEqual((await request(`${url}/models`)).json(), {});
    assert.equal((await request(`${url}/ping`)).status, 200);
  });

  it('loads, lists, describes, invokes, unloads and reloads a model', async () => {
    const loaded = await load({ model_name: 'alpha', url: join(models, 'alpha') });
    assert.equal(loaded.status, 200, loaded.text);
    // The container's words, naming the TF Serving ports the model is now served on.
    assert.deepEqual(loaded.json(), {
      success: `Successfully loaded model alpha, listening on rest port ${new URL(h.rest).port} and grpc port ${h.server.ports.grpc}.`,
    });
    // Listing and describing answer TF Serving's model status, as the container relays it.
    const available = {
      model_version_status: [
        { version: '1', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } },
      ],
    };
    assert.deepEqual((await request(`${url}/models`)).json(), { alpha: available });
    assert.deepEqual((await request(`${url}/models/alpha`)).json(), { model: available });
    const again = await load({ model_name: 'alpha', url: join(models, 'alpha') });
    assert.equal(again.status, 409);
    assert.match(again.text, /already loaded/);
    const invoked = await request(`${url}/models/alpha/invoke`, {
      body: '{"instances": [1, 2]}',
      headers: json,
    });
    assert.equal(invoked.status, 200, invoked.text);
    assert.deepEqual(invoked.json(), { predictions: [2.5, 3] });
    // The loaded model is served by the TF Serving REST API too.
    const tfs = await request(`${h.rest}/v1/models/alpha:predict`, {
      body: '{"instances": [4]}',
      headers: json,
    });
    assert.deepEqual(tfs.json(), { predictions: [4] });

    const unloaded = await request(`${url}/models/alpha`, { method: 'DELETE' });
    assert.equal(unloaded.status, 200);
    assert.deepEqual(unloaded.json(), { success: 'Successfully unloaded model alpha.' });
    const gone = await request(`${url}/models/alpha`);
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.json(), { error: 'Model alpha is not loaded yet.' });
    assert.equal((await request(`${url}/models/alpha`, { method: 'DELETE' })).status, 404);
    const unknownInvoke = await request(`${url}/models/alpha/invoke`, { body: '[1]', headers: json });
    assert.equal(unknownInvoke.status, 404);
    assert.deepEqual(unknownInvoke.json(), { error: 'Model alpha is not loaded yet.' });

    assert.equal((await load({ model_name: 'alpha', url: join(models, 'alpha') })).status, 200);
    const reinvoked = await request(`${url}/models/alpha/invoke`, { body: '3', headers: json });
    assert.deepEqual(reinvoked.json(), { predictions: [3.5] });
    assert.equal((await request(`${url}/models/alpha`, { method: 'DELETE' })).status, 200);
  });

  it('invokes an image model with its visionserve.json through /models/{m}/invoke', async () => {
    assert.equal((await load({ model_name: 'beta', url: join(models, 'beta') })).status, 200);
    const res = await request(`${url}/models/beta/invoke`, {
      body: image('cat_tabby.jpg'),
      headers: { 'Content-Type': 'application/x-image' },
    });
    assert.equal(res.status, 200, res.text);
    const top = (res.json() as { predictions: { class_id: number; label: string }[][] }).predictions[0]![0]!;
    assert.deepEqual(top.class_id, 281);
    assert.equal(top.label, 'tabby, tabby cat');
    assert.equal((await request(`${url}/models/beta`, { method: 'DELETE' })).status, 200);
  });

  it('reloading a model picks up changed handler code', async () => {
    const base = join(models, 'coded');
    const version = (v: string): string =>
      `export function handler() { return [JSON.stringify({ code: '${v}' }), 'application/json']; }`;
    await writeHandler(base, 'inference.mjs', version('v1'));
    assert.equal((await load({ model_name: 'coded', url: base })).status, 200);
    const v1 = await request(`${url}/models/coded/invoke`, { body: '1', headers: json });
    assert.deepEqual(v1.json(), { code: 'v1' });
    assert.equal((await request(`${url}/models/coded`, { method: 'DELETE' })).status, 200);
    await writeHandler(base, 'inference.mjs', version('v2'));
    assert.equal((await load({ model_name: 'coded', url: base })).status, 200);
    const v2 = await request(`${url}/models/coded/invoke`, { body: '1', headers: json });
    assert.deepEqual(v2.json(), { code: 'v2' });
    assert.equal((await request(`${url}/models/coded`, { method: 'DELETE' })).status, 200);
  });

  it('answers the container status codes for bad load requests', async () => {
    const cases: [unknown, number, RegExp][] = [
      [{ url: join(models, 'alpha') }, 400, /missing model_name/],
      [{ model_name: 'x' }, 400, /missing url/],
      ['{"model_name": ', 400, /JSON/],
      [{ model_name: '../x', url: join(models, 'alpha') }, 400, /Invalid model_name/],
      [{ model_name: 'x', url: join(models, 'nope') }, 404, /Could not find/],
      [
        { model_name: 'x', url: join(models, 'empty') },
        404,
        /Could not find valid base path .* for servable x/,
      ],
      [{ model_name: 'x', url: join(models, 'corrupt') }, 500, /Failed to load model x/],
      [{ model_name: 'x', url: join(models, 'badconfig') }, 400, /visionserve.json/],
    ];
    for (const [body, status, message] of cases) {
      const res = await load(body);
      assert.equal(res.status, status, `${JSON.stringify(body)} -> ${res.text}`);
      assert.match((res.json() as { error: string }).error, message);
    }
    // Failed loads leave nothing behind.
    assert.deepEqual((await request(`${url}/models`)).json(), {});
  });

  it('refuses urls outside the model roots: ../ traversal, absolute paths, symlinks out', async () => {
    for (const bad of [
      `${models}/../outside`,
      `${models}/alpha/../../${outside.split('/').pop()!}/evil`,
      join(outside, 'evil'),
      '/etc',
      '/',
      'alpha',
      join(models, 'link_out'),
      `file://${join(outside, 'evil')}`,
      's3://bucket/model',
    ]) {
      const res = await load({ model_name: 'x', url: bad });
      assert.equal(res.status, 404, `${bad} -> ${res.text}`);
    }
    assert.deepEqual((await request(`${url}/models`)).json(), {});
    // file:// inside the roots is fine.
    const ok = await load({ model_name: 'viafile', url: `file://${join(models, 'gamma')}` });
    assert.equal(ok.status, 200, ok.text);
    assert.equal((await request(`${url}/models/viafile`, { method: 'DELETE' })).status, 200);
  });

  it('507 once the configured model limit is reached', async () => {
    const names = ['m1', 'm2', 'm3', 'm4'];
    for (const name of names) {
      const res = await load({ model_name: name, url: join(models, 'gamma') });
      assert.equal(res.status, 200, res.text);
    }
    const over = await load({ model_name: 'm5', url: join(models, 'gamma') });
    assert.equal(over.status, 507);
    assert.match((over.json() as { error: string }).error, /limit of 4/);
    for (const name of names) {
      assert.equal((await request(`${url}/models/${name}`, { method: 'DELETE' })).status, 200);
    }
  });
});

describe('SageMaker multi-model limits: memory (507) and load timeout (408)', () => {
  it('refuses loads above the memory limit and answers 408 for slow loads', async () => {
    const root = await tempRepo('vs-sm-mme-limits-');
    await placeModel(root, 'gamma', 1, halfPlusTwoModel());
    const body = JSON.stringify({ model_name: 'g', url: join(root, 'gamma') });
    const memory = await startHarness({
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      sagemakerMultiModel: true,
      sagemakerModelRoots: [root],
      sagemakerMemoryLimitBytes: 1,
      instances: 1,
    });
    try {
      const res = await request(`${memory.sagemaker}/models`, { body, headers: json });
      assert.equal(res.status, 507);
      assert.match(res.text, /memory limit/);
    } finally {
      await memory.close();
    }
    const slow = await startHarness({
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      sagemakerMultiModel: true,
      sagemakerModelRoots: [root],
      sagemakerModelLoadTimeoutMs: 1,
      instances: 1,
    });
    try {
      const res = await request(`${slow.sagemaker}/models`, { body, headers: json });
      assert.equal(res.status, 408);
      assert.match(res.text, /Timed out loading model g/);
    } finally {
      await slow.close();
    }
  });
});
