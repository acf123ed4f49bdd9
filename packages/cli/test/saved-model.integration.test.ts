/**
 * SavedModel versions on a real server, with a stand-in for the Python converter (an
 * executable that writes what savedmodel_to_onnx.py writes), so the server's side runs on
 * any machine: the conversion cache, one ONNX file per signature with the SavedModel's
 * names, dtypes, unknown ranks and method names, tf.Example signatures, an unsupported
 * signature replaced by the encoded-image signature, and the load errors (no converter,
 * unsupported ops, timeout). The real converter on real SavedModels is tested by compat/.
 */
import { after, before, describe, it } from 'node:test';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import assert from 'node:assert/strict';
import { chmod, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { ExampleSchema } from '@visionserve/protocol/tfs-proto';
import sharp from 'sharp';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { buildOnnxModel } from '../src/tools/onnx-builder.js';
import { tempRepo } from './helpers/model-repo.js';
import { REPO_ROOT } from './helpers/shared.js';
import { request } from './helpers/sagemaker-models.js';
import { type Harness, postJson, startHarness } from './helpers/server-harness.js';

/**
 * The converter stand-in: `<python> <script> --saved-model DIR --out-dir OUT` copies
 * DIR/fake/manifest.json and the ONNX files it names into OUT, counting its runs in
 * DIR/../runs; DIR/fake/mode "sleep" sleeps (writing its pid), "broken" fails.
 */
const FAKE_CONVERTER = `#!/usr/bin/env node
const fs = require('node:fs');
const path = require('node:path');
const args = process.argv.slice(3);
const dir = args[args.indexOf('--saved-model') + 1];
const out = args[args.indexOf('--out-dir') + 1];
const runs = path.join(dir, '..', 'runs');
fs.writeFileSync(runs, String(Number(fs.existsSync(runs) ? fs.readFileSync(runs, 'utf8') : '0') + 1));
const mode = fs.existsSync(path.join(dir, 'fake', 'mode')) ? fs.readFileSync(path.join(dir, 'fake', 'mode'), 'utf8') : 'ok';
if (mode === 'sleep') {
  fs.writeFileSync(path.join(dir, '..', 'pid'), String(process.pid));
  setTimeout(() => {}, 60000);
} else if (mode === 'broken') {
  console.log(JSON.stringify({ ok: false, error: 'cannot read the SavedModel: DecodeError: truncated' }));
  process.exit(1);
} else {
  fs.mkdirSync(out, { recursive: true });
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'fake', 'manifest.json'), 'utf8'));
  for (const s of Object.values(manifest.signatures)) {
    if (s.onnx) {
      fs.mkdirSync(path.dirname(path.join(out, s.onnx)), { recursive: true });
      fs.copyFileSync(path.join(dir, 'fake', path.basename(s.onnx)), path.join(out, s.onnx));
    }
  }
  fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(manifest));
  console.log(JSON.stringify({ ok: true }));
}
`;

const f32 = (shape: number[] | null): { dtype: string; shape: number[] | null } => ({
  dtype: 'float32',
  shape,
});

/** outputs = 0.5 * x + 2 on x [batch, 1] (a regress signature cut after its ParseExample). */
function regressModel(): Uint8Array {
  return buildOnnxModel({
    inputs: [{ name: 'x', dtype: 'float32', shape: ['batch', 1] }],
    outputs: [{ name: 'outputs', dtype: 'float32', shape: ['batch', 1] }],
    initializers: [
      { name: 'half', dtype: 'float32', dims: [], values: [0.5] },
      { name: 'two', dtype: 'float32', dims: [], values: [2] },
    ],
    nodes: [
      { op: 'Mul', inputs: ['x', 'half'], outputs: ['h'] },
      { op: 'Add', inputs: ['h', 'two'], outputs: ['outputs'] },
    ],
  });
}

/** y = 0.5 * x + 2 with shapeless ONNX inputs, as tf2onnx writes a SavedModel's unknown-rank input. */
function anyRankModel(): Uint8Array {
  return buildOnnxModel({
    inputs: [{ name: 'x', dtype: 'float32', shape: [] }],
    outputs: [{ name: 'y', dtype: 'float32', shape: [] }],
    initializers: [
      { name: 'half', dtype: 'float32', dims: [], values: [0.5] },
      { name: 'two', dtype: 'float32', dims: [], values: [2] },
    ],
    nodes: [
      { op: 'Mul', inputs: ['x', 'half'], outputs: ['h'] },
      { op: 'Add', inputs: ['h', 'two'], outputs: ['y'] },
    ],
  });
}

/** Mean colour of a [batch, 2, 2, 3] image: `probabilities` [batch, 3]. */
function meanColourModel(): Uint8Array {
  return buildOnnxModel({
    inputs: [{ name: 'images', dtype: 'float32', shape: ['batch', 2, 2, 3] }],
    outputs: [{ name: 'probabilities', dtype: 'float32', shape: ['batch', 3] }],
    nodes: [
      {
        op: 'ReduceMean',
        inputs: ['images'],
        outputs: ['probabilities'],
        attributes: { axes: [1, 2], keepdims: 0 },
      },
    ],
  });
}

/** A SavedModel version the stand-in converts: a unique saved_model.pb, the manifest and its ONNX files. */
async function placeSavedModel(
  root: string,
  name: string,
  manifest: unknown,
  files: Record<string, Uint8Array>,
  mode = 'ok',
): Promise<string> {
  const base = join(root, name);
  const dir = join(base, '1');
  await mkdir(join(dir, 'fake'), { recursive: true });
  await mkdir(join(dir, 'variables'), { recursive: true });
  await writeFile(join(dir, 'saved_model.pb'), `saved model ${name} ${mode}`);
  await writeFile(join(dir, 'variables', 'variables.index'), name);
  await writeFile(join(dir, 'fake', 'manifest.json'), JSON.stringify(manifest));
  await writeFile(join(dir, 'fake', 'mode'), mode);
  for (const [file, bytes] of Object.entries(files)) await writeFile(join(dir, 'fake', file), bytes);
  return base;
}

const MULTI = {
  format: 1,
  converter: { tensorflow: 'fake' },
  signatures: {
    serving_default: {
      status: 'ok',
      methodName: 'tensorflow/serving/predict',
      inputs: { x: f32([-1]) },
      outputs: { y: f32([-1]) },
      onnx: 's0/model.onnx',
    },
    predict_unknown_rank: {
      status: 'ok',
      methodName: 'tensorflow/serving/predict',
      inputs: { x: f32(null) },
      outputs: { y: f32(null) },
      onnx: 's2/any_rank.onnx',
    },
    regress_x_to_y: {
      status: 'ok',
      methodName: 'tensorflow/serving/regress',
      inputs: { inputs: { dtype: 'string', shape: [-1] } },
      outputs: { outputs: f32([-1, 1]) },
      examples: { inputKey: 'inputs', features: [{ key: 'x', dtype: 'float32', shape: [1] }] },
      onnx: 's1/model.onnx',
    },
  },
};

const WITH_BYTES = {
  format: 1,
  converter: { tensorflow: 'fake' },
  signatures: {
    serving_default: {
      status: 'ok',
      methodName: 'tensorflow/serving/predict',
      inputs: { images: f32([-1, 2, 2, 3]) },
      outputs: { probabilities: f32([-1, 3]) },
      onnx: 's0/model.onnx',
    },
    serving_bytes: {
      status: 'unsupported',
      methodName: 'tensorflow/serving/predict',
      inputs: { image_bytes: { dtype: 'string', shape: [-1] } },
      outputs: { probabilities: f32([-1, 3]) },
      unsupportedOps: ['DecodeJpeg'],
      error: 'uses TensorFlow ops with no ONNX equivalent: DecodeJpeg',
    },
  },
};

interface StatusJson {
  model_version_status: { state: string; status: { error_code: string; error_message: string } }[];
}

describe('TensorFlow SavedModel versions (converter stand-in)', () => {
  let h: Harness;
  let root: string;
  let cacheDir: string;
  let converter: string;

  before(async () => {
    root = await tempRepo('vs-savedmodel-');
    cacheDir = join(root, 'cache');
    converter = join(root, 'fake-python');
    await writeFile(converter, FAKE_CONVERTER);
    await chmod(converter, 0o755);
    await placeSavedModel(root, 'multi', MULTI, {
      'model.onnx': halfPlusTwoModel(),
    });
    // Two files of the same name: the stand-in copies by basename, so give s1 its own.
    await writeFile(join(root, 'multi', '1', 'fake', 'model.onnx'), halfPlusTwoModel());
    const multiManifest = structuredClone(MULTI);
    multiManifest.signatures.regress_x_to_y.onnx = 's1/regress.onnx';
    await writeFile(join(root, 'multi', '1', 'fake', 'manifest.json'), JSON.stringify(multiManifest));
    await writeFile(join(root, 'multi', '1', 'fake', 'regress.onnx'), regressModel());
    await writeFile(join(root, 'multi', '1', 'fake', 'any_rank.onnx'), anyRankModel());

    const image = await placeSavedModel(root, 'cnn', WITH_BYTES, { 'model.onnx': meanColourModel() });
    await writeFile(
      join(image, 'visionserve.json'),
      JSON.stringify({ image: { width: 2, height: 2, resize: 'stretch', layout: 'NHWC', scale: 1 / 255 } }),
    );
    await placeSavedModel(root, 'cnn_without_config', WITH_BYTES, { 'model.onnx': meanColourModel() }, 'ok2');
    await placeSavedModel(root, 'broken', MULTI, {}, 'broken');
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'multi' base_path: 'multi' model_platform: 'tensorflow' }
        config { name: 'cnn' base_path: 'cnn' }
        config { name: 'cnn_without_config' base_path: 'cnn_without_config' }
        config { name: 'broken' base_path: 'broken' }
      }`,
    );
    h = await startHarness({
      modelConfigFile: config,
      fileSystemPollSeconds: 0,
      savedModelConverterPython: converter,
      savedModelCacheDir: cacheDir,
      // Some versions fail to load on purpose: start anyway.
      waitForModels: true,
    });
  });
  after(async () => {
    await h.close();
  });

  it("keeps every SignatureDef's name, keys, dtypes, unknown ranks and method name", async () => {
    const meta = (await request(`${h.rest}/v1/models/multi/metadata`)).json() as {
      metadata: { signature_def: { signature_def: Record<string, Record<string, unknown>> } };
    };
    const defs = meta.metadata.signature_def.signature_def;
    assert.deepEqual(Object.keys(defs).sort(), ['predict_unknown_rank', 'regress_x_to_y', 'serving_default']);
    assert.equal(defs['regress_x_to_y']!['method_name'], 'tensorflow/serving/regress');
    assert.deepEqual(defs['regress_x_to_y']!['inputs'], {
      inputs: {
        name: 'inputs',
        dtype: 'DT_STRING',
        tensor_shape: { dim: [{ size: '-1', name: '' }], unknown_rank: false },
      },
    });
    assert.deepEqual(
      (defs['predict_unknown_rank']!['inputs'] as Record<string, { tensor_shape: unknown }>)['x']!
        .tensor_shape,
      { dim: [], unknown_rank: true },
    );
  });

  it('runs each signature; an unknown-rank input takes any rank', async () => {
    assert.deepEqual((await postJson(`${h.rest}/v1/models/multi:predict`, { instances: [1, 2, 5] })).json, {
      predictions: [2.5, 3, 4.5],
    });
    const any = await postJson(`${h.rest}/v1/models/multi:predict`, {
      signature_name: 'predict_unknown_rank',
      inputs: {
        x: [
          [1, 2],
          [3, 4],
        ],
      },
    });
    assert.deepEqual(any.json, {
      outputs: [
        [2.5, 3],
        [3.5, 4],
      ],
    });
  });

  it('parses tf.Examples for the signature cut after ParseExample: Regress, and Predict with serialized examples', async () => {
    const regress = await postJson(`${h.rest}/v1/models/multi:regress`, {
      signature_name: 'regress_x_to_y',
      examples: [{ x: [1.0] }, { x: 3.0 }],
    });
    assert.deepEqual(regress.json, { results: [2.5, 3.5] });
    const example = toBinary(
      ExampleSchema,
      create(ExampleSchema, {
        features: { feature: { x: { kind: { case: 'floatList', value: { value: [4] } } } } },
      }),
    );
    const predict = await postJson(`${h.rest}/v1/models/multi:predict`, {
      signature_name: 'regress_x_to_y',
      instances: [{ b64: Buffer.from(example).toString('base64') }],
    });
    assert.deepEqual(predict.json, { predictions: [[4]] });
    const garbage = await postJson(`${h.rest}/v1/models/multi:predict`, {
      signature_name: 'regress_x_to_y',
      instances: [{ b64: Buffer.from([0xff, 0xff, 0xff]).toString('base64') }],
    });
    assert.equal(garbage.status, 400);
    assert.match((garbage.json as { error: string }).error, /^Could not parse example input/);
    const wrongShape = await postJson(`${h.rest}/v1/models/multi:regress`, {
      signature_name: 'regress_x_to_y',
      examples: [{ x: [1.0, 2.0] }],
    });
    assert.equal(
      (wrongShape.json as { error: string }).error,
      'Name: <unknown>, Key: x, Index: 0.  Number of float values != expected.  Values size: 2 but output shape: [1]',
    );
  });

  it('serves an unconvertible image_bytes signature from visionserve.json instead', async () => {
    const png = await sharp(Buffer.from([255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255]), {
      raw: { width: 2, height: 2, channels: 3 },
    })
      .png()
      .toBuffer();
    const res = await postJson(`${h.rest}/v1/models/cnn:predict`, {
      signature_name: 'serving_bytes',
      instances: [{ image_bytes: { b64: png.toString('base64') } }],
    });
    assert.equal(res.status, 200, JSON.stringify(res.json));
    const [r, g, b] = (res.json as { predictions: number[][] }).predictions[0]!;
    assert.ok(Math.abs(r! - 0.5) < 1e-6 && Math.abs(g! - 0.5) < 1e-6 && Math.abs(b! - 0.5) < 1e-6);
  });

  it('serves the signatures that converted and names the others with their ops (partial load)', async () => {
    const status = (await request(`${h.rest}/v1/models/cnn_without_config`)).json() as StatusJson;
    const v = status.model_version_status[0]!;
    assert.equal(v.state, 'AVAILABLE');
    assert.equal(v.status.error_code, 'OK');
    assert.equal(
      v.status.error_message,
      'Signatures not served: "serving_bytes" uses TensorFlow ops with no ONNX equivalent: DecodeJpeg',
    );
    const metadata = (await request(`${h.rest}/v1/models/cnn_without_config/metadata`)).json() as {
      metadata: { signature_def: { signature_def: Record<string, unknown> }; unserved_signatures: unknown };
    };
    assert.deepEqual(Object.keys(metadata.metadata.signature_def.signature_def), ['serving_default']);
    assert.deepEqual(metadata.metadata.unserved_signatures, {
      serving_bytes: 'uses TensorFlow ops with no ONNX equivalent: DecodeJpeg',
    });
    const bytes = await postJson(`${h.rest}/v1/models/cnn_without_config:predict`, {
      signature_name: 'serving_bytes',
      instances: [{ b64: 'AAAA' }],
    });
    assert.equal(bytes.status, 400);
    assert.match(
      JSON.stringify(bytes.json),
      /not served: it uses TensorFlow ops with no ONNX equivalent: DecodeJpeg/,
    );
  });

  it("reports a converter failure in the version's status", async () => {
    const v = ((await request(`${h.rest}/v1/models/broken`)).json() as StatusJson).model_version_status[0]!;
    assert.equal(v.state, 'END');
    assert.match(v.status.error_message, /SavedModel conversion failed: cannot read the SavedModel/);
  });

  it('caches conversions by content: a restart converts nothing again', async () => {
    const runsBefore = Number(await readFile(join(root, 'multi', 'runs'), 'utf8'));
    assert.equal(runsBefore, 1);
    const again = await startHarness({
      modelBasePath: join(root, 'multi'),
      modelName: 'multi',
      fileSystemPollSeconds: 0,
      savedModelConverterPython: converter,
      savedModelCacheDir: cacheDir,
    });
    try {
      assert.deepEqual((await postJson(`${again.rest}/v1/models/multi:predict`, { instances: [1] })).json, {
        predictions: [2.5],
      });
    } finally {
      await again.close();
    }
    assert.equal(Number(await readFile(join(root, 'multi', 'runs'), 'utf8')), 1);
    const entries = await readdir(join(cacheDir, 'savedmodel'));
    assert.ok(
      entries.every((e) => !e.includes('.tmp-')),
      `no leftovers: ${entries.join(', ')}`,
    );
  });
});

describe('SavedModel load errors', () => {
  async function statusOf(flags: Parameters<typeof startHarness>[0], base: string): Promise<StatusJson> {
    const h = await startHarness({
      modelBasePath: base,
      modelName: 'm',
      fileSystemPollSeconds: 0,
      waitForModels: true,
      ...flags,
    });
    try {
      return (await request(`${h.rest}/v1/models/m`)).json() as StatusJson;
    } finally {
      await h.close();
    }
  }

  it('without a converter environment: FAILED_PRECONDITION naming the setup command', async () => {
    const root = await tempRepo('vs-savedmodel-none-');
    const base = await placeSavedModel(root, 'm', MULTI, {});
    const none = await statusOf({ savedModelCacheDir: join(root, 'empty-cache') }, base);
    assert.equal(none.model_version_status[0]!.status.error_code, 'FAILED_PRECONDITION');
    assert.match(none.model_version_status[0]!.status.error_message, /npx visionserve convert --setup/);
    const missing = await statusOf({ savedModelConverterPython: join(root, 'no-such-python') }, base);
    assert.match(
      missing.model_version_status[0]!.status.error_message,
      /does not exist: run "npx visionserve convert --setup"/,
    );
  });

  it('kills a conversion that runs past the timeout (its whole process group) and reports DEADLINE_EXCEEDED', async () => {
    const root = await tempRepo('vs-savedmodel-slow-');
    const converter = join(root, 'fake-python');
    await writeFile(converter, FAKE_CONVERTER);
    await chmod(converter, 0o755);
    const base = await placeSavedModel(root, 'm', MULTI, {}, 'sleep');
    const started = Date.now();
    const status = await statusOf(
      {
        savedModelConverterPython: converter,
        savedModelCacheDir: join(root, 'cache'),
        savedModelConversionTimeoutSeconds: 2,
      },
      base,
    );
    assert.ok(Date.now() - started < 30_000);
    const v = status.model_version_status[0]!;
    assert.equal(v.status.error_code, 'DEADLINE_EXCEEDED');
    assert.match(v.status.error_message, /did not finish within 2 s/);
    const pid = Number(await readFile(join(root, 'm', 'pid'), 'utf8'));
    assert.throws(() => process.kill(pid, 0), /ESRCH/);
  });
});

describe('visionserve convert', () => {
  const CLI = join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js');
  const run = promisify(execFile);

  it('converts every version of a model ahead of time into the cache the server reads, naming failures', async () => {
    const root = await tempRepo('vs-convert-');
    const converter = join(root, 'fake-python');
    await writeFile(converter, FAKE_CONVERTER);
    await chmod(converter, 0o755);
    const base = await placeSavedModel(root, 'cnn', WITH_BYTES, { 'model.onnx': meanColourModel() });
    const cache = join(root, 'cache');
    const args = [CLI, 'convert', base, '--python', converter, '--cache-dir', cache];
    interface Exit {
      code: number;
      stdout: string;
    }
    const exit = (e: unknown): Exit => e as Exit;
    const failed = await run(process.execPath, args).then(() => undefined, exit);
    assert.equal(failed?.code, 1, 'serving_bytes does not convert');
    assert.match(failed.stdout, /serving_default: ok \(tensorflow\/serving\/predict\)/);
    assert.match(
      failed.stdout,
      /serving_bytes: unsupported: uses TensorFlow ops with no ONNX equivalent: DecodeJpeg/,
    );
    const { stdout } = await run(process.execPath, [...args, '--json']).catch(exit);
    const report = JSON.parse(stdout) as {
      cached: boolean;
      signatures: Record<string, { status: string }>;
    }[];
    assert.equal(report[0]!.cached, true);
    assert.equal(report[0]!.signatures['serving_default']!.status, 'ok');
    const usage = await run(process.execPath, [CLI, 'convert']).then(() => undefined, exit);
    assert.equal(usage?.code, 2);
  });
});
