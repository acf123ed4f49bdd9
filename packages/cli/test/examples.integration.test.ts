/**
 * The runnable examples in examples/*.mjs, each run as a child process (`node examples/<x>.mjs`)
 * against one real server on loopback (MobileNetV2 int8 and the TF-OD style YOLOX wrapper from
 * ../shared). A missing export, a renamed option or a changed answer shape fails here.
 * Scores are compared with raw onnxruntime on this CPU, never with fixed values.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type ClassScore, IMAGE_PRESETS, MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import { allScores, assertSameTopK, runReference } from './helpers/reference.js';
import { IMAGES, MODELS, REPO_ROOT, image, sharedModel } from './helpers/shared.js';
import { tempRepo } from './helpers/model-repo.js';
import { placeDetector, placeMobilenet } from './helpers/sagemaker-models.js';
import { type Harness, startHarness } from './helpers/server-harness.js';

const runFile = promisify(execFile);

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `node examples/<file> ...args` from the repository root; resolves with its exit code and output. */
async function runExample(
  file: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<Run> {
  try {
    const { stdout, stderr } = await runFile(process.execPath, [join('examples', file), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number') throw error;
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

const show = (r: Run): string => `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;

/** Raw onnxruntime's softmax ranking of the tabby cat with the given preprocessing. */
async function referenceTabby(preset: Parameters<typeof imageToTensor>[1]): Promise<ClassScore[]> {
  const { tensor } = await imageToTensor(image('cat_tabby.jpg'), preset);
  const out = await runReference(sharedModel('mobilenetv2-12-int8.onnx'), { input: tensor });
  return allScores(out['output']!, { softmax: true });
}

describe('examples/*.mjs against a real server', () => {
  let h: Harness;
  let grpc: string;
  before(async () => {
    const root = await tempRepo('vs-examples-');
    await placeMobilenet(root);
    await placeDetector(root);
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'detector' base_path: 'detector' }
      }`,
    );
    h = await startHarness({
      modelConfigFile: config,
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      sagemakerDefaultModelName: 'mobilenet',
    });
    grpc = `127.0.0.1:${h.server.ports.grpc!}`;
  });
  after(async () => {
    await h.close();
  });

  it('classify-image.mjs: gRPC top-3 of the tabby cat with ImageNet labels', async () => {
    const r = await runExample('classify-image.mjs', [
      join(IMAGES, 'cat_tabby.jpg'),
      grpc,
      'mobilenet',
      join(MODELS, 'imagenet_synset.txt'),
    ]);
    assert.equal(r.code, 0, show(r));
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines[0], 'mobilenet v1:', show(r));
    const top = lines.slice(1).map((line) => {
      const m = /^ {2}(\d+) (.+) (\d\.\d{3})$/.exec(line);
      assert.ok(m, `unexpected line ${JSON.stringify(line)}\n${show(r)}`);
      return { class_id: Number(m[1]), label: m[2]!, score: Number(m[3]) };
    });
    assert.equal(top.length, 3, show(r));
    assert.deepEqual(
      { class_id: top[0]!.class_id, label: top[0]!.label },
      { class_id: 281, label: 'tabby, tabby cat' },
    );
    // Printed with 3 decimals: the same ranking as raw onnxruntime, to within the rounding.
    assertSameTopK(top, await referenceTabby(IMAGE_PRESETS.imagenet), 6e-4);
  });

  it('classify-image.mjs: an unknown model exits 1 with the server code and message', async () => {
    const r = await runExample('classify-image.mjs', [join(IMAGES, 'cat_tabby.jpg'), grpc, 'nope']);
    assert.equal(r.code, 1, show(r));
    assert.match(r.stderr, /^ServingError code=5: Servable not found for request: Latest\(nope\)/m, show(r));
  });

  it('batch-and-deadlines.mjs: metadata, status, a batched predict and a deadline', async () => {
    const files = ['cat_tabby.jpg', 'dog_beagle.jpg', 'cat_tabby.jpg'].map((f) => join(IMAGES, f));
    const r = await runExample('batch-and-deadlines.mjs', files, { VS_GRPC: grpc });
    assert.equal(r.code, 0, show(r));
    assert.deepEqual(
      r.stdout.trimEnd().split('\n'),
      [
        'mobilenet v1: input DT_FLOAT [-1,3,224,224]',
        'status: v1 AVAILABLE',
        `${files[0]!}: class 281`,
        `${files[1]!}: class 162`,
        `${files[2]!}: class 281`,
        '1 ms deadline -> DEADLINE_EXCEEDED, as expected',
      ],
      show(r),
    );
  });

  it('detect-rest.mjs: REST detections on the soccer photo with the COCO label map', async () => {
    const r = await runExample('detect-rest.mjs', [
      join(IMAGES, 'scene_soccer.jpg'),
      h.rest,
      'detector',
      join(MODELS, 'mscoco_label_map.pbtxt'),
    ]);
    assert.equal(r.code, 0, show(r));
    const found = r.stdout
      .trimEnd()
      .split('\n')
      .map((line) => {
        const m = /^(.+?) +(\d\.\d\d) {2}x (\d+)-(\d+) {2}y (\d+)-(\d+)$/.exec(line);
        assert.ok(m, `unexpected line ${JSON.stringify(line)}\n${show(r)}`);
        const [x0, x1, y0, y1] = m.slice(3, 7).map(Number) as [number, number, number, number];
        // Pixel boxes inside the 1280x853 photo, not degenerate.
        assert.ok(x0 < x1 && x1 <= 1280 && y0 < y1 && y1 <= 853, line);
        assert.ok(Number(m[2]) >= 0.5, line);
        return m[1]!;
      });
    assert.deepEqual(found.sort(), ['person', 'person', 'person', 'sports ball'], show(r));
  });

  it('invocations.mjs: image bytes to /invocations give the labelled top-5', async () => {
    const r = await runExample('invocations.mjs', [join(IMAGES, 'cat_tabby.jpg'), h.sagemaker, 'mobilenet']);
    assert.equal(r.code, 0, show(r));
    const { predictions } = JSON.parse(r.stdout) as { predictions: ClassScore[][] };
    assert.equal(predictions.length, 1);
    const top = predictions[0]!;
    assert.equal(top.length, 5);
    assert.deepEqual(
      { class_id: top[0]!.class_id, label: top[0]!.label },
      { class_id: 281, label: 'tabby, tabby cat' },
    );
    assertSameTopK(top, await referenceTabby(MOBILENET_V2_VISION_CONFIG.image));
  });
});
