/**
 * The real CLI (bin/visionserve.js) as a child process: predict against a real server over
 * gRPC and REST (and /invocations against a stub of the container contract), inspect on
 * every model in ../shared/models (checked against its README signature) and on a running
 * server, help and exit codes.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { IMAGES, MODELS, REPO_ROOT, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startHarness, type Harness } from './helpers/server-harness.js';

const CLI = join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js');
const run = promisify(execFile);

async function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('visionserve predict against a real server', () => {
  let h: Harness;
  let grpc: string;
  before(async () => {
    const root = await tempRepo();
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    await placeModel(root, 'detector', 1, sharedModel('yolox_nano_tfod.onnx'));
    await writeFile(
      join(root, 'models.config'),
      `model_config_list { config { name: 'mobilenet' base_path: 'mobilenet' } config { name: 'detector' base_path: 'detector' } }`,
    );
    h = await startHarness({ modelConfigFile: join(root, 'models.config'), fileSystemPollSeconds: 0 });
    grpc = `127.0.0.1:${h.server.ports.grpc!}`;
  });
  after(async () => {
    await h.close();
  });

  it('prints "tabby" as the top class of cat_tabby.jpg (MobileNetV2, gRPC and REST)', async () => {
    const labels = join(MODELS, 'imagenet_synset.txt');
    const image = join(IMAGES, 'cat_tabby.jpg');
    const viaGrpc = await cli(['predict', image, '--model', 'mobilenet', '--grpc', grpc, '--labels', labels]);
    assert.equal(viaGrpc.code, 0, viaGrpc.stderr);
    const first = viaGrpc.stdout.split('\n').find((l) => /^\s+1\./.test(l));
    assert.match(first ?? '', /281\s+tabby, tabby cat/);
    const viaRest = await cli([
      'predict',
      image,
      '--model',
      'mobilenet',
      '--protocol',
      'rest',
      '--rest',
      h.rest,
      '--labels',
      labels,
      '--json',
    ]);
    assert.equal(viaRest.code, 0, viaRest.stderr);
    const json = JSON.parse(viaRest.stdout) as {
      task: string;
      classes: { class_id: number; label: string; score: number }[];
    };
    assert.equal(json.task, 'classify');
    assert.equal(json.classes[0]!.class_id, 281);
    assert.equal(json.classes[0]!.label, 'tabby, tabby cat');
    assert.ok(json.classes[0]!.score > 0.5);
  });

  it('prints three persons and a sports ball for scene_soccer.jpg (TF-OD detector)', async () => {
    const args = [
      'predict',
      join(IMAGES, 'scene_soccer.jpg'),
      '--model',
      'detector',
      '--label-map',
      join(MODELS, 'mscoco_label_map.pbtxt'),
    ];
    const text = await cli([...args, '--grpc', grpc]);
    assert.equal(text.code, 0, text.stderr);
    const lines = text.stdout.split('\n').filter((l) => /^\s+\S/.test(l));
    assert.equal(lines.filter((l) => /^\s+person\s/.test(l)).length, 3, text.stdout);
    assert.equal(lines.filter((l) => /^\s+sports ball\s/.test(l)).length, 1, text.stdout);
    const json = await cli([...args, '--protocol', 'rest', '--rest', h.rest, '--json']);
    const detections = (
      JSON.parse(json.stdout) as { detections: { label: string; box_pixels: { xmin: number } }[] }
    ).detections;
    assert.deepEqual(detections.map((d) => d.label).sort(), ['person', 'person', 'person', 'sports ball']);
    assert.ok(detections.every((d) => d.box_pixels.xmin >= 0 && d.box_pixels.xmin < 1280));
  });

  it('sends .npy and JSON tensor files', async () => {
    const dir = await tempRepo('vs-cli-');
    const { encodeNpy, tensor } = await import('@visionserve/client');
    const { IMAGE_PRESETS, imageToTensor } = await import('@visionserve/client/image');
    const { image } = await import('./helpers/shared.js');
    const cat = (await imageToTensor(image('cat_tabby.jpg'), IMAGE_PRESETS.imagenet)).tensor;
    await writeFile(join(dir, 'cat.npy'), encodeNpy(tensor(cat.data as Float32Array, cat.shape)));
    const npy = await cli([
      'predict',
      join(dir, 'cat.npy'),
      '--model',
      'mobilenet',
      '--grpc',
      grpc,
      '--json',
      '--top-k',
      '1',
    ]);
    assert.equal(npy.code, 0, npy.stderr);
    assert.equal((JSON.parse(npy.stdout) as { classes: { class_id: number }[] }).classes[0]!.class_id, 281);
    const { nest } = await import('./helpers/server-harness.js');
    await writeFile(
      join(dir, 'cat.json'),
      JSON.stringify({ instances: nest(cat.data as Float32Array, cat.shape) }),
    );
    const json = await cli([
      'predict',
      join(dir, 'cat.json'),
      '--model',
      'mobilenet',
      '--protocol',
      'rest',
      '--rest',
      h.rest,
      '--top-k',
      '1',
    ]);
    assert.equal(json.code, 0, json.stderr);
    assert.match(json.stdout, /281\s+class 281/);
  });

  it('exits 1 with the server message on runtime failures, 2 on usage errors', async () => {
    const missing = await cli(['predict', join(IMAGES, 'cat_tabby.jpg'), '--model', 'nope', '--grpc', grpc]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /Servable not found for request: Latest\(nope\)/);
    const usage = await cli(['predict', join(IMAGES, 'cat_tabby.jpg'), '--protocol', 'carrier-pigeon']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--protocol expects one of grpc\|rest\|invocations/);
    assert.equal((await cli(['predict', '--no-such-flag'])).code, 2);
    assert.equal((await cli(['frobnicate'])).code, 2);
    const help = await cli(['predict', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: visionserve predict <input>/);
    assert.match((await cli(['help'])).stdout, /inspect <model>/);
  });

  it('inspect asks a running server (GetModelMetadata over gRPC)', async () => {
    const r = await cli(['inspect', '--grpc', grpc, '--model', 'mobilenet']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /MODEL mobilenet version 1/);
    assert.match(
      r.stdout,
      /inputs\['input'\] tensor_info:\n\s+dtype: DT_FLOAT\n\s+shape: \(-1, 3, 224, 224\)/,
    );
  });
});

describe('visionserve predict --protocol invocations (stub of the SageMaker container contract)', () => {
  let server: http.Server;
  let url: string;
  let seen: { type: string | undefined; attributes: string | undefined; bytes: number } | undefined;
  before(async () => {
    server = http.createServer((req, res) => {
      let bytes = 0;
      req.on('data', (c: Buffer) => (bytes += c.length));
      req.on('end', () => {
        seen = {
          type: req.headers['content-type'],
          attributes: req.headers['x-amzn-sagemaker-custom-attributes'] as string | undefined,
          bytes,
        };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            predictions: [
              { label: 'tabby, tabby cat', index: 281, score: 0.84 },
              { label: 'Egyptian cat', index: 285, score: 0.09 },
            ],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('posts the image bytes with tfs-model-name and prints the ranked answer', async () => {
    const r = await cli([
      'predict',
      join(IMAGES, 'cat_tabby.jpg'),
      '--protocol',
      'invocations',
      '--invocations',
      url,
      '--model',
      'mobilenet',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(seen, {
      type: 'application/x-image',
      attributes: 'tfs-model-name=mobilenet',
      bytes: 51_755,
    });
    assert.match(r.stdout, /1\. tabby, tabby cat\s+0\.8400/);
  });
});

/** Signatures from ../shared/models/README.md. */
const README_SIGNATURES: Record<
  string,
  {
    opset: number;
    ir: number;
    nodes: number;
    producer?: string;
    inputs: Record<string, [string, number[]]>;
    outputs: Record<string, [string, number[]]>;
  }
> = {
  'mobilenetv2-12-int8.onnx': {
    opset: 12,
    ir: 7,
    nodes: 73,
    producer: 'onnx.quantize',
    inputs: { input: ['DT_FLOAT', [-1, 3, 224, 224]] },
    outputs: { output: ['DT_FLOAT', [-1, 1000]] },
  },
  'mnist-8.onnx': {
    opset: 8,
    ir: 3,
    nodes: 12,
    producer: 'CNTK',
    inputs: { Input3: ['DT_FLOAT', [1, 1, 28, 28]] },
    outputs: { Plus214_Output_0: ['DT_FLOAT', [1, 10]] },
  },
  'yolox_nano.onnx': {
    opset: 11,
    ir: 7,
    nodes: 369,
    producer: 'pytorch',
    inputs: { images: ['DT_FLOAT', [1, 3, 416, 416]] },
    outputs: { output: ['DT_FLOAT', [1, 3549, 85]] },
  },
  'yolox_nano_tfod.onnx': {
    opset: 11,
    ir: 7,
    nodes: 438,
    inputs: { input_tensor: ['DT_UINT8', [1, -1, -1, 3]] },
    outputs: {
      detection_boxes: ['DT_FLOAT', [1, 100, 4]],
      detection_classes: ['DT_FLOAT', [1, 100]],
      detection_scores: ['DT_FLOAT', [1, 100]],
      num_detections: ['DT_FLOAT', [1]],
    },
  },
};

describe('visionserve inspect on ../shared/models matches the README signatures', () => {
  for (const [file, expected] of Object.entries(README_SIGNATURES)) {
    it(file, async () => {
      const r = await cli(['inspect', sharedModel(file), '--json']);
      assert.equal(r.code, 0, r.stderr);
      interface View {
        sizeBytes: number;
        onnx: {
          irVersion: number;
          producerName: string;
          nodeCount: number;
          opsets: { domain: string; version: number }[];
        };
        signatures: Record<
          string,
          {
            inputs: Record<string, { tfDtype: string; shape: number[] }>;
            outputs: Record<string, { tfDtype: string; shape: number[] }>;
          }
        >;
      }
      const [view] = (JSON.parse(r.stdout) as { models: View[] }).models;
      assert.ok(view);
      assert.equal(view.onnx.irVersion, expected.ir);
      assert.equal(view.onnx.nodeCount, expected.nodes);
      assert.equal(view.onnx.opsets.find((o) => o.domain === 'ai.onnx')?.version, expected.opset);
      if (expected.producer)
        assert.ok(view.onnx.producerName.startsWith(expected.producer), view.onnx.producerName);
      const sig = view.signatures['serving_default']!;
      const flatten = (
        m: Record<string, { tfDtype: string; shape: number[] }>,
      ): Record<string, [string, number[]]> =>
        Object.fromEntries(Object.entries(m).map(([k, v]) => [k, [v.tfDtype, v.shape]]));
      assert.deepEqual(flatten(sig.inputs), expected.inputs);
      assert.deepEqual(flatten(sig.outputs), expected.outputs);
      assert.ok(view.sizeBytes > 20_000);
    });
  }

  it('walks a repository directory and prints saved_model_cli-style text', async () => {
    const root = await tempRepo();
    await placeModel(root, 'mnist', 1, sharedModel('mnist-8.onnx'));
    await placeModel(root, 'mnist', 2, sharedModel('mnist-8.onnx'));
    await placeModel(root, 'yolox', 1, sharedModel('yolox_nano.onnx'));
    const r = await cli(['inspect', root]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.match(/^MODEL \S+ version \d+/gm), [
      'MODEL mnist version 1',
      'MODEL mnist version 2',
      'MODEL yolox version 1',
    ]);
    assert.match(r.stdout, /inputs:\n\s+inputs\['Input3'\] tensor_info:/);
    assert.match(r.stdout, /method: tensorflow\/serving\/predict/);
    const bad = await cli(['inspect', join(MODELS, 'imagenet_synset.txt')]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /not an ONNX model/);
  });
});
