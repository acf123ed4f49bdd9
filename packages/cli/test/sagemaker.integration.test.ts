import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { buildOnnxModel } from '../src/tools/onnx-builder.js';
import { createTfsGrpcClient } from '@visionserve/client';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import { allScores, assertSameTopK, runReference } from './helpers/reference.js';
import { IMAGES, REPO_ROOT, image, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import {
  type HttpResult,
  MOBILENET_ENDPOINT_CONFIG,
  placeDetector,
  placeMobilenet,
  request,
} from './helpers/sagemaker-models.js';

/** y = 0.5 * x + 2 on `[batch, 3]` rows (for multi-column CSV). */
function halfPlusTwoRows(): Uint8Array {
  return buildOnnxModel({
    graphName: 'half_plus_two_rows',
    inputs: [{ name: 'x', dtype: 'float32', shape: ['batch', 3] }],
    outputs: [{ name: 'y', dtype: 'float32', shape: ['batch', 3] }],
    initializers: [
      { name: 'half', dtype: 'float32', dims: [], values: [0.5] },
      { name: 'two', dtype: 'float32', dims: [], values: [2] },
    ],
    nodes: [
      { op: 'Mul', inputs: ['x', 'half'], outputs: ['x_half'] },
      { op: 'Add', inputs: ['x_half', 'two'], outputs: ['y'] },
    ],
  });
}

interface ClassScore {
  class_id: number;
  label?: string;
  score: number;
}
interface Detection {
  class_id: number;
  label?: string;
  score: number;
  box: { ymin: number; xmin: number; ymax: number; xmax: number };
  box_pixels: { ymin: number; xmin: number; ymax: number; xmax: number };
}

const CLI = join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js');
const runFile = promisify(execFile);

const attrs = (value: string): Record<string, string> => ({ 'X-Amzn-SageMaker-Custom-Attributes': value });

describe('SageMaker endpoint on real models (no user code)', () => {
  let h: Harness;
  let url: string;
  before(async () => {
    const root = await tempRepo('vs-sm-');
    await placeMobilenet(root);
    await placeDetector(root);
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    await placeModel(root, 'rows', 1, halfPlusTwoRows());
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'detector' base_path: 'detector' }
        config { name: 'half_plus_two' base_path: 'half_plus_two' }
        config { name: 'rows' base_path: 'rows' }
      }`,
    );
    h = await startHarness({
      modelConfigFile: config,
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      sagemakerDefaultModelName: 'half_plus_two',
    });
    url = h.sagemaker;
  });
  after(async () => {
    await h.close();
  });

  it('GET /ping is 200 while the default model is AVAILABLE; unknown paths are 404, wrong methods 405', async () => {
    const ping = await request(`${url}/ping`);
    assert.equal(ping.status, 200);
    assert.deepEqual(ping.json(), { status: 'AVAILABLE', model: 'half_plus_two', version: '1' });
    const missing = await request(`${url}/v1/models/half_plus_two`);
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.json(), { error: 'Not Found' });
    // Multi-model routes are off in single-model mode.
    assert.equal((await request(`${url}/models`)).status, 404);
    const wrong = await request(`${url}/invocations`);
    assert.equal(wrong.status, 405);
  });

  /** The top-5 raw onnxruntime gives for an image with the model's own visionserve.json, on this machine. */
  async function referenceTop(file: string): Promise<ClassScore[]> {
    const { tensor } = await imageToTensor(image(file), MOBILENET_V2_VISION_CONFIG.image);
    const out = await runReference(sharedModel('mobilenetv2-12-int8.onnx'), { input: tensor });
    return allScores(out['output']!, { softmax: true });
  }

  it('classifies cat_tabby.jpg sent as application/x-image: top-1 281 "tabby, tabby cat"', async () => {
    const res = await request(`${url}/invocations`, {
      body: image('cat_tabby.jpg'),
      headers: { 'Content-Type': 'application/x-image', ...attrs('tfs-model-name=mobilenet') },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.contentType, 'application/json');
    const { predictions } = res.json() as { predictions: ClassScore[][] };
    assert.equal(predictions.length, 1);
    const top = predictions[0]!;
    assert.equal(top.length, 5);
    // The labelled photo: a tabby.
    assert.deepEqual(
      { class_id: top[0]!.class_id, label: top[0]!.label },
      { class_id: 281, label: 'tabby, tabby cat' },
    );
    // The rest agrees with raw onnxruntime on this CPU (scores differ between AVX2 and AVX-512 machines).
    assertSameTopK(top, await referenceTop('cat_tabby.jpg'));
  });

  it('image/jpeg and image/png work too; JSON Lines responses on Accept: application/jsonlines', async () => {
    const png = await request(`${url}/invocations`, {
      body: image('cat_chelsea.png'),
      headers: {
        'Content-Type': 'image/png',
        Accept: 'application/jsonlines',
        ...attrs('tfs-model-name=mobilenet,tfs-model-version=1'),
      },
    });
    assert.equal(png.status, 200, png.text);
    assert.equal(png.contentType, 'application/jsonlines');
    assert.ok(!png.text.includes('\n'));
    const top = (png.json() as { predictions: ClassScore[][] }).predictions[0]!;
    // The labelled photo: Chelsea is an Egyptian-looking tabby; 285 leads by a wide margin on every CPU.
    assert.equal(top[0]!.class_id, 285);
    assertSameTopK(top, await referenceTop('cat_chelsea.png'));
    const jpeg = await request(`${url}/invocations`, {
      body: image('cat_tabby.jpg'),
      headers: { 'Content-Type': 'image/jpeg', ...attrs('tfs-model-name=mobilenet') },
    });
    assert.equal(jpeg.status, 200, jpeg.text);
    assert.equal((jpeg.json() as { predictions: ClassScore[][] }).predictions[0]![0]!.class_id, 281);
  });

  it('detects persons and a sports ball in scene_soccer.jpg with the TF-OD model and its label map', async () => {
    const res = await request(`${url}/invocations`, {
      body: image('scene_soccer.jpg'),
      headers: { 'Content-Type': 'image/jpeg', ...attrs('tfs-model-name=detector') },
    });
    assert.equal(res.status, 200, res.text);
    const result = (res.json() as { predictions: { num_detections: number; detections: Detection[] }[] })
      .predictions[0]!;
    const labels = result.detections.map((d) => d.label);
    assert.equal(labels.filter((l) => l === 'person').length, 3, labels.join(','));
    assert.equal(labels.filter((l) => l === 'sports ball').length, 1, labels.join(','));
    assert.equal(result.num_detections, 4);
    const ball = result.detections.find((d) => d.label === 'sports ball')!;
    assert.equal(ball.class_id, 37);
    for (const [got, want] of [
      [ball.box.ymin, 0.828],
      [ball.box.xmin, 0.752],
      [ball.box.ymax, 0.928],
      [ball.box.xmax, 0.827],
    ] as const) {
      assert.ok(Math.abs(got - want) < 0.02, `ball box ${JSON.stringify(ball.box)}`);
    }
    // Pixel boxes are in the 1280x853 source image.
    assert.ok(Math.abs(ball.box_pixels.xmin - 0.752 * 1280) < 26);
    for (const d of result.detections) assert.ok(d.score >= 0.5);
  });

  it('`visionserve predict --protocol invocations` prints the detections as a short table', async () => {
    const { stdout, stderr } = await runFile(
      process.execPath,
      [
        CLI,
        'predict',
        join(IMAGES, 'scene_soccer.jpg'),
        '--protocol',
        'invocations',
        '--invocations',
        url,
        '--model',
        'detector',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    const lines = stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^\/invocations: 4 detections$/, stdout + stderr);
    assert.equal(lines.length, 5, stdout);
    assert.equal(lines.filter((l) => /^\s+person\s+0\.\d\d\s/.test(l)).length, 3, stdout);
    assert.equal(lines.filter((l) => /^\s+sports ball\s+0\.\d\d\s/.test(l)).length, 1, stdout);
  });

  it('application/json: TF Serving bodies pass through, bare values are wrapped as instances', async () => {
    const post = (body: string, headers: Record<string, string> = {}): Promise<HttpResult> =>
      request(`${url}/invocations`, { body, headers: { 'Content-Type': 'application/json', ...headers } });
    assert.deepEqual((await post('{"instances": [1.0, 2.0, 5.0]}')).json(), { predictions: [2.5, 3, 4.5] });
    assert.deepEqual((await post('{"inputs": {"x": [1.0, 2.0]}}')).json(), { outputs: [2.5, 3] });
    // As in the container, a flat list is one instance (only a list of lists passes through as is).
    assert.deepEqual((await post('[1.0, 2.0, 5.0]', attrs('tfs-model-name=rows'))).json(), {
      predictions: [[2.5, 3, 4.5]],
    });
    assert.equal((await post('[1.0, 2.0, 5.0]')).status, 400, 'one rank-2 instance for a rank-1 input');
    assert.deepEqual((await post('7')).json(), { predictions: [5.5] });
    // JSON Lines sent as application/json are detected.
    assert.deepEqual((await post('1.0\n2.0\n')).json(), { predictions: [2.5, 3] });
    // Routing by custom attributes; a missing version is 404; classify takes tf.Examples, as TF Serving's :classify.
    const rows = await post('[[1, 2, 3], [4, 5, 6]]', attrs('tfs-model-name=rows'));
    assert.deepEqual(rows.json(), {
      predictions: [
        [2.5, 3, 3.5],
        [4, 4.5, 5],
      ],
    });
    const v7 = await post('1', attrs('tfs-model-name=half_plus_two, tfs-model-version=7'));
    assert.equal(v7.status, 404);
    assert.match(v7.text, /Specific\(half_plus_two, 7\)/);
    const classify = await post('1', attrs('tfs-method=classify'));
    assert.equal(classify.status, 400);
    assert.match(classify.text, /key 'examples' is expected and was not found/);
    assert.equal((await post('1', attrs('tfs-model-version=x1'))).status, 400);
    assert.equal((await post('1', attrs('tfs-model-name=nope'))).status, 404);
    const bad = await post('{"instances": [1.0,');
    assert.equal(bad.status, 400);
    assert.match((bad.json() as { error: string }).error, /JSON/);
  });

  it('application/jsonlines and text/csv: each line is an instance', async () => {
    const jsonl = await request(`${url}/invocations`, {
      body: '1.0\n2.0\n5.0\n',
      headers: { 'Content-Type': 'application/jsonlines' },
    });
    assert.deepEqual(jsonl.json(), { predictions: [2.5, 3, 4.5] });
    const jsons = await request(`${url}/invocations`, {
      body: '[1, 2, 3]\n[4, 5, 6]',
      headers: { 'Content-Type': 'application/jsons', ...attrs('tfs-model-name=rows') },
    });
    assert.deepEqual((jsons.json() as { predictions: number[][] }).predictions[1], [4, 4.5, 5]);
    const csv = await request(`${url}/invocations`, {
      body: '1.0\r\n2.0\r\n5.0\r\n',
      headers: { 'Content-Type': 'text/csv' },
    });
    assert.equal(csv.status, 200, csv.text);
    assert.deepEqual(csv.json(), { predictions: [2.5, 3, 4.5] });
    const csvRows = await request(`${url}/invocations`, {
      body: '1,2,3\n4,5,6\n',
      headers: { 'Content-Type': 'text/csv; charset=utf-8', ...attrs('tfs-model-name=rows') },
    });
    assert.deepEqual(csvRows.json(), {
      predictions: [
        [2.5, 3, 3.5],
        [4, 4.5, 5],
      ],
    });
    const csvText = await request(`${url}/invocations`, {
      body: 'a,"b, c"\n',
      headers: { 'Content-Type': 'text/csv', ...attrs('tfs-model-name=rows') },
    });
    assert.equal(csvText.status, 400);
  });

  it('415 for unknown content types, for images without an image config, and for unsupported Accept', async () => {
    const text = await request(`${url}/invocations`, {
      body: 'hello',
      headers: { 'Content-Type': 'text/plain' },
    });
    assert.equal(text.status, 415);
    assert.deepEqual(text.json(), { error: 'Unsupported Media Type: text/plain' });
    const img = await request(`${url}/invocations`, {
      body: image('cat_tabby.jpg'),
      headers: { 'Content-Type': 'application/x-image' },
    });
    assert.equal(img.status, 415);
    assert.match((img.json() as { error: string }).error, /^Unsupported Media Type: application\/x-image/);
    const accept = await request(`${url}/invocations`, {
      body: '1',
      headers: { 'Content-Type': 'application/json', Accept: 'text/html' },
    });
    assert.equal(accept.status, 415);
    const wildcard = await request(`${url}/invocations`, {
      body: '1',
      headers: { 'Content-Type': 'application/json', Accept: 'text/html, */*;q=0.1' },
    });
    assert.equal(wildcard.status, 200);
    assert.equal(wildcard.contentType, 'application/json');
  });
});

describe("editing a model's visionserve.json", () => {
  it('and reloading the config changes the /invocations answer without a restart', async () => {
    const root = await tempRepo('vs-sm-edit-');
    const base = await placeMobilenet(root);
    const h = await startHarness({ modelName: 'mobilenet', modelBasePath: base, sagemakerPort: 0 });
    const client = createTfsGrpcClient({
      address: `127.0.0.1:${h.server.ports.grpc!}`,
      defaultTimeoutMs: 30_000,
    });
    try {
      const ask = async (): Promise<{ label: string }[]> => {
        const res = await request(`${h.sagemaker}/invocations`, {
          body: image('cat_tabby.jpg'),
          headers: { 'Content-Type': 'image/jpeg' },
        });
        assert.equal(res.status, 200, res.text);
        return (res.json() as { predictions: { label: string }[][] }).predictions[0]!;
      };
      const first = await ask();
      assert.equal(first.length, 5);
      assert.match(first[0]!.label, /tabby/);
      // Top-2 with other label names: the next answer must follow the edited file.
      const synset = await readFile(join(base, 'imagenet_synset.txt'), 'utf8');
      await writeFile(join(base, 'renamed.txt'), synset.replaceAll('tabby', 'TABBY'));
      await writeFile(
        join(base, 'visionserve.json'),
        JSON.stringify({
          ...MOBILENET_ENDPOINT_CONFIG,
          postprocess: { ...MOBILENET_ENDPOINT_CONFIG.postprocess, topK: 2, labels: 'renamed.txt' },
        }),
      );
      await client.reloadConfig([{ name: 'mobilenet', basePath: base }]);
      const second = await ask();
      assert.equal(second.length, 2);
      assert.match(second[0]!.label, /TABBY/);
    } finally {
      client.close();
      await h.close();
    }
  });
});
