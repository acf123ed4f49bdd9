/**
 * SageMaker deployment on a real server: model directories as SageMaker hands them over
 * (versions at the top or several models, plus code/), model.tar.gz, handler dependencies
 * from code/package.json (npm registry), /execution-parameters and multi-record answers.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel } from './helpers/model-repo.js';
import { request } from './helpers/sagemaker-models.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { packArchive, writeSeedModel } from './helpers/seed-model.js';
import { image } from './helpers/shared.js';

const jpeg = { 'Content-Type': 'image/jpeg' };

describe('SageMaker model directory with the seed layout (handler + code/package.json)', () => {
  let h: Harness;
  let dir: string;
  before(async () => {
    dir = await writeSeedModel(join(await mkdtemp(join(tmpdir(), 'vs-seed-')), 'model'));
    h = await startHarness({
      sagemakerModelDir: dir,
      sagemakerPort: 0,
      modelCacheDir: join(dir, '..', 'cache'),
      fileSystemPollSeconds: 1,
    });
  });
  after(async () => {
    await h.close();
  });

  it('installs the dependency once, then the handler that imports it classifies cat_tabby.jpg as 281', async () => {
    const ping = await request(`${h.sagemaker}/ping`);
    assert.equal(ping.status, 200, ping.text);
    assert.deepEqual(ping.json(), { status: 'AVAILABLE', model: 'model', version: '1' });
    const marker = join(dir, 'code', 'node_modules', '.visionserve-install.json');
    const installedAt = (await stat(marker)).mtimeMs;
    await stat(join(dir, 'code', 'node_modules', 'jpeg-js', 'package.json'));
    const res = await request(`${h.sagemaker}/invocations`, { body: image('cat_tabby.jpg'), headers: jpeg });
    assert.equal(res.status, 200, res.text);
    const answer = res.json() as { class_id: number; decoder: string };
    assert.deepEqual([answer.class_id, answer.decoder], [281, 'jpeg-js']);
    // A second version: loaded without a second installation.
    await mkdir(join(dir, '2'));
    await writeFile(join(dir, '2', 'model.onnx'), await readFile(join(dir, '1', 'model.onnx')));
    const end = Date.now() + 20_000;
    while (((await request(`${h.sagemaker}/ping`)).json() as { version?: string }).version !== '2') {
      assert.ok(Date.now() < end, 'version 2 never became AVAILABLE');
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal((await stat(marker)).mtimeMs, installedAt);
    const again = await request(`${h.sagemaker}/invocations`, {
      body: image('cat_tabby.jpg'),
      headers: jpeg,
    });
    assert.equal((again.json() as { class_id: number }).class_id, 281);
  });
});

describe('the seed layout as model.tar.gz (--model_base_path)', () => {
  it('unpacks the archive, installs code/package.json in the unpacked copy, the handler classifies cat_tabby.jpg as 281', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vs-seed-tgz-'));
    const seed = await writeSeedModel(join(root, 'seed'));
    packArchive(seed, join(root, 'model.tar.gz'));
    await rm(seed, { recursive: true });
    const h = await startHarness({
      sagemakerPort: 0,
      modelBasePath: join(root, 'model.tar.gz'),
      modelName: 'seed',
      modelCacheDir: join(root, 'cache'),
    });
    try {
      const res = await request(`${h.sagemaker}/invocations`, {
        body: image('cat_tabby.jpg'),
        headers: jpeg,
      });
      assert.equal(res.status, 200, res.text);
      const answer = res.json() as { class_id: number; decoder: string };
      assert.deepEqual([answer.class_id, answer.decoder], [281, 'jpeg-js']);
    } finally {
      await h.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});

/**
 * Stands in for the SavedModel converter's Python (`<python> <script> --saved-model DIR
 * --out-dir OUT`): writes one serving_default signature (x -> y) and the ONNX file found
 * beside this script, so the server's side of a SavedModel version runs on any machine.
 */
const CONVERTER_STAND_IN = `#!/usr/bin/env node
const fs = require('node:fs');
const path = require('node:path');
const args = process.argv.slice(3);
const out = args[args.indexOf('--out-dir') + 1];
fs.mkdirSync(path.join(out, 's0'), { recursive: true });
fs.copyFileSync(path.join(__dirname, 'hp2.onnx'), path.join(out, 's0', 'model.onnx'));
const f32 = { dtype: 'float32', shape: [-1] };
fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify({
  format: 1,
  converter: { tensorflow: 'stand-in' },
  signatures: { serving_default: { status: 'ok', methodName: 'tensorflow/serving/predict', inputs: { x: f32 }, outputs: { y: f32 }, onnx: 's0/model.onnx' } },
}));
console.log(JSON.stringify({ ok: true }));
`;

describe('a SageMaker TF Serving model.tar.gz holding 1/saved_model.pb (converter stand-in)', () => {
  it('finds the SavedModel version in the unpacked archive, converts it on load and answers /invocations', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vs-sm-savedmodel-'));
    const model = join(root, 'model');
    await mkdir(join(model, '1', 'variables'), { recursive: true });
    await writeFile(join(model, '1', 'saved_model.pb'), 'a SavedModel (the stand-in does not read it)');
    await writeFile(join(model, '1', 'variables', 'variables.index'), '');
    packArchive(model, join(root, 'model.tar.gz'));
    const converter = join(root, 'python');
    await writeFile(converter, CONVERTER_STAND_IN);
    await chmod(converter, 0o755);
    await writeFile(join(root, 'hp2.onnx'), halfPlusTwoModel());
    const h = await startHarness({
      sagemakerModelDir: join(root, 'model.tar.gz'),
      sagemakerPort: 0,
      modelCacheDir: join(root, 'cache'),
      savedModelConverterPython: converter,
      savedModelCacheDir: join(root, 'converted'),
    });
    try {
      assert.deepEqual((await request(`${h.sagemaker}/ping`)).json(), {
        status: 'AVAILABLE',
        model: 'model',
        version: '1',
      });
      const res = await request(`${h.sagemaker}/invocations`, {
        body: '{"instances": [1.0, 2.0]}',
        headers: { 'Content-Type': 'application/json' },
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json(), { predictions: [2.5, 3] });
    } finally {
      await h.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('handler dependencies: vendored node_modules, failed installation', () => {
  it('uses a vendored code/node_modules as it is, and names a failed installation in the model status', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vs-deps-'));
    const vendored = await writeSeedModel(join(root, 'vendored'));
    await mkdir(join(vendored, 'code', 'node_modules', 'jpeg-js'), { recursive: true });
    await writeFile(
      join(vendored, 'code', 'node_modules', 'jpeg-js', 'package.json'),
      '{"name":"jpeg-js","version":"0.0.0-vendored","main":"index.js"}',
    );
    await writeFile(
      join(vendored, 'code', 'node_modules', 'jpeg-js', 'index.js'),
      "module.exports = { decode() { throw new Error('the vendored jpeg-js'); } };",
    );
    const broken = await writeSeedModel(join(root, 'broken'));
    await writeFile(
      join(broken, 'code', 'package.json'),
      JSON.stringify({ dependencies: { 'visionserve-test-no-such-package-4f2a9c': '1.0.0' } }),
    );
    const h = await startHarness({ sagemakerPort: 0, modelBasePath: vendored, modelName: 'vendored' });
    try {
      const res = await request(`${h.sagemaker}/invocations`, {
        body: image('cat_tabby.jpg'),
        headers: jpeg,
      });
      assert.equal(res.status, 500);
      assert.match(res.text, /the vendored jpeg-js/);
    } finally {
      await h.close();
    }
    // Start-up refuses a model that does not load, naming the npm failure (the container exits too).
    await assert.rejects(
      startHarness({ sagemakerPort: 0, modelBasePath: broken, modelName: 'broken' }),
      /installing the handler's dependencies failed: npm install exit 1[\s\S]*visionserve-test-no-such-package-4f2a9c/,
    );
    // With --wait_for_models it starts; the version is END with the error in its status.
    const b = await startHarness({
      sagemakerPort: 0,
      modelBasePath: broken,
      modelName: 'broken',
      waitForModels: true,
    });
    try {
      assert.equal((await request(`${b.sagemaker}/ping`)).status, 503);
      const status = (await request(`${b.rest}/v1/models/broken`)).json() as {
        model_version_status: { state: string; status: { error_message: string } }[];
      };
      const v = status.model_version_status[0]!;
      assert.equal(v.state, 'END');
      assert.match(v.status.error_message, /installing the handler's dependencies failed: npm install exit/);
      assert.match(v.status.error_message, /visionserve-test-no-such-package-4f2a9c/);
    } finally {
      await b.close();
    }
  });
});

describe('several models in one model directory, model.tar.gz, execution parameters, multi-record', () => {
  let h: Harness;
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'vs-smdir-'));
    const models = join(root, 'opt-ml-model');
    await placeModel(models, 'a', 1, halfPlusTwoModel());
    await placeModel(models, 'b', 1, halfPlusTwoModel());
    await mkdir(join(models, 'code'));
    // Shared code/: serves every model (the container has one inference.py for all).
    await writeFile(
      join(models, 'code', 'inference.mjs'),
      'export const output_handler = (r, c) => [JSON.stringify({ model: c.modelName, ...r.json() }), "application/json"];\n',
    );
    packArchive(models, join(root, 'model.tar.gz'));
    h = await startHarness({
      sagemakerModelDir: join(root, 'model.tar.gz'),
      sagemakerPort: 0,
      sagemakerDefaultModelName: 'b',
      modelCacheDir: join(root, 'cache'),
      fileSystemPollSeconds: 0,
    });
  });
  after(async () => {
    await h.close();
  });

  it('unpacks model.tar.gz, serves every model, routes to SAGEMAKER_TFS_DEFAULT_MODEL_NAME, shares code/', async () => {
    const res = await request(`${h.sagemaker}/invocations`, { body: '{"instances": [1.0, 2.0]}' });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json(), { model: 'b', predictions: [2.5, 3] });
    const a = await request(`${h.sagemaker}/invocations`, {
      body: '{"instances": [1.0]}',
      headers: { 'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=a' },
    });
    assert.deepEqual(a.json(), { model: 'a', predictions: [2.5] });
    assert.deepEqual((await request(`${h.sagemaker}/ping`)).json(), {
      status: 'AVAILABLE',
      model: 'b',
      version: '1',
    });
  });

  it('GET /execution-parameters', async () => {
    const res = await request(`${h.sagemaker}/execution-parameters`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), {
      MaxConcurrentTransforms: 2 * availableParallelism(), // twice the default --model_instances
      BatchStrategy: 'MULTI_RECORD',
      MaxPayloadInMB: 6,
    });
  });
});

describe('multi-record requests answered line by line', () => {
  let h: Harness;
  before(async () => {
    const root = await mkdtemp(join(tmpdir(), 'vs-mr-'));
    await placeModel(root, 'hp2', 1, halfPlusTwoModel());
    h = await startHarness({ sagemakerPort: 0, modelBasePath: join(root, 'hp2'), modelName: 'hp2' });
  });
  after(async () => {
    await h.close();
  });

  it('JSON Lines and CSV with Accept: application/jsonlines: line i is what record i alone gets', async () => {
    const lines = ['1.0', '2.0', '', '5.0', '-3.25'];
    const post = (body: string, type: string): ReturnType<typeof request> =>
      request(`${h.sagemaker}/invocations`, {
        body,
        headers: { 'Content-Type': type, Accept: 'application/jsonlines' },
      });
    for (const type of ['application/jsonlines', 'text/csv']) {
      const whole = await post(lines.join('\n') + '\n', type);
      assert.equal(whole.status, 200, whole.text);
      assert.equal(whole.contentType, 'application/jsonlines');
      const singles: string[] = [];
      for (const line of lines.filter((l) => l !== '')) singles.push((await post(line, type)).text);
      assert.deepEqual(whole.text.split('\n'), singles);
      assert.equal(singles[0], '{"predictions":[2.5]}');
    }
    // Accept: application/json keeps the single TF Serving answer.
    const json = await request(`${h.sagemaker}/invocations`, {
      body: '1.0\n2.0\n',
      headers: { 'Content-Type': 'application/jsonlines' },
    });
    assert.deepEqual(json.json(), { predictions: [2.5, 3] });
  });
});
