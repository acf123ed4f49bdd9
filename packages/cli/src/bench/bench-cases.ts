/**
 * The benchmark's cases: which model (staged into a model repository), which request, and
 * what the image paths send. Each case is one entry of CASES; suites pick cases by id.
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type DType, type Tensor } from '@visionserve/protocol';
import { IMAGE_PRESETS, MOBILENET_V2_VISION_CONFIG, type VisionConfig } from '@visionserve/vision';
import { makeBatchDynamic } from '../tools/batching-models.js';
import { rawDetectorModel } from '../tools/fixture-models.js';
import type { PathId } from './bench-paths.js';

export type CaseId = 'mobilenet' | 'raw_detector' | 'yolox';
export const CASE_IDS: readonly CaseId[] = ['mobilenet', 'raw_detector', 'yolox'];

/** An encoded image and the visionserve.json that turns it into a request and a top-k answer. */
export interface CaseImage {
  readonly file: string;
  readonly bytes: Uint8Array;
  /** The model's visionserve.json (image preprocessing and classification post-processing). */
  readonly vision: VisionConfig;
  /** Contents of the labels file the post-processing names. */
  readonly labelsText: string | undefined;
}

export interface BenchCase {
  readonly id: CaseId;
  /** Model name on the server (also the repository directory name). */
  readonly model: string;
  readonly title: string;
  /** Input alias -> tensor sent by every tensor path. */
  readonly inputs: Readonly<Record<string, Tensor>>;
  /** Output alias -> dtype (lets the REST client skip its metadata lookup). */
  readonly outputs: Readonly<Record<string, DType>>;
  /** Encoded image for /invocations and the image floor; undefined when the case has none. */
  readonly image: CaseImage | undefined;
  /** Why the case has no image rows, when it has none. */
  readonly noImageReason?: string;
  /** Description of the request for the report. */
  readonly requestNote: string;
}

export interface CaseSpec {
  readonly id: CaseId;
  readonly title: string;
  /** Short name for table cells, e.g. "YOLOX-Nano". */
  readonly short: string;
  /** Whether the case sends an encoded image (/invocations and the image floor). */
  readonly hasImage: boolean;
  /**
   * Rough latency of one request per path on a busy 2-core box, ms (default 20): only for the
   * duration estimate, so that blocks whose minimum request count outlasts `durationMs` are
   * planned as long as they will be.
   */
  readonly costMs: Partial<Record<PathId, number>>;
  /** Writes `<dir>/1/model.onnx` and the model's assets. */
  stage(dir: string, sharedDir: string): Promise<void>;
  /** Builds the request tensors from the shared photos (sharp is loaded here, by the bench process). */
  load(sharedDir: string): Promise<BenchCase>;
}

const MOBILENET_FILE = 'mobilenetv2-12-int8.onnx';
const IMAGENET_LABELS = 'imagenet_synset.txt';

async function imageTensor(
  bytes: Uint8Array,
  options: Parameters<typeof import('@visionserve/vision/image').imageToTensor>[1],
): Promise<Tensor> {
  const { imageToTensor } = await import('@visionserve/vision/image');
  return (await imageToTensor(bytes, options)).tensor;
}

const kib = (n: number): string => n.toLocaleString('en-US');

export const CASES: Readonly<Record<CaseId, CaseSpec>> = {
  mobilenet: {
    id: 'mobilenet',
    title: 'MobileNetV2 int8 classification (small request, small response)',
    short: 'MobileNetV2 int8',
    hasImage: true,
    costMs: { 'rest-json': 70, invocations: 25, 'image-floor': 20, 'rest-b64': 25, 'rest-b64-cached': 5 },
    async stage(dir, sharedDir) {
      await mkdir(join(dir, '1'), { recursive: true });
      await copyFile(join(sharedDir, 'models', MOBILENET_FILE), join(dir, '1', 'model.onnx'));
      // /invocations: JPEG in, ImageNet preprocessing, softmax top-5 with labels out.
      await copyFile(join(sharedDir, 'models', IMAGENET_LABELS), join(dir, IMAGENET_LABELS));
      await writeFile(join(dir, 'visionserve.json'), JSON.stringify(MOBILENET_V2_VISION_CONFIG, null, 2));
    },
    async load(sharedDir) {
      const file = 'cat_tabby.jpg';
      const bytes = new Uint8Array(await readFile(join(sharedDir, 'images', file)));
      const vision = MOBILENET_V2_VISION_CONFIG;
      return {
        id: 'mobilenet',
        model: 'mobilenet',
        title: this.title,
        // The same tensor the server's /invocations builds from the JPEG.
        inputs: { input: await imageTensor(bytes, vision.image) },
        outputs: { output: 'float32' },
        image: {
          file,
          bytes,
          vision,
          labelsText: await readFile(join(sharedDir, 'models', IMAGENET_LABELS), 'utf8'),
        },
        requestNote: `${file} (${kib(bytes.byteLength)} B JPEG) -> float32 [1,3,224,224]; response float32 [1,1000]`,
      };
    },
  },
  raw_detector: {
    id: 'raw_detector',
    title: 'Raw detector, EfficientDet-D1-sized response (96,000 anchors × 90 classes + boxes)',
    short: 'raw detector',
    hasImage: false,
    costMs: {
      floor: 30,
      'in-process': 45,
      'grpc-tensor-content': 250,
      'grpc-typed': 350,
      'kserve-http': 250,
      'kserve-json': 4000,
      'kserve-grpc': 250,
      'grpc-tls': 400,
      'kserve-https': 400,
      'rest-json': 4000,
    },
    async stage(dir) {
      await mkdir(join(dir, '1'), { recursive: true });
      await writeFile(join(dir, '1', 'model.onnx'), rawDetectorModel());
    },
    async load(sharedDir) {
      const file = 'scene_soccer.jpg';
      const bytes = new Uint8Array(await readFile(join(sharedDir, 'images', file)));
      const tensor = await imageTensor(bytes, {
        width: 640,
        height: 640,
        resize: 'stretch',
        layout: 'NHWC',
        dtype: 'uint8',
      });
      return {
        id: 'raw_detector',
        model: 'raw_detector',
        title: this.title,
        inputs: { input_tensor: tensor },
        outputs: { raw_detection_boxes: 'float32', raw_detection_scores: 'float32' },
        image: undefined,
        noImageReason: '/invocations returns post-processed top-k JSON, not raw head outputs',
        requestNote: `${file} resized to uint8 [1,640,640,3] (1.2 MB); response float32 [1,96000,4] + [1,96000,90] (9.0 M floats)`,
      };
    },
  },
  yolox: {
    id: 'yolox',
    title: 'YOLOX-Nano 416 (raw head output, batch dimension made dynamic)',
    short: 'YOLOX-Nano',
    hasImage: false,
    costMs: { floor: 15, 'in-process': 18, 'grpc-tensor-content': 22, 'grpc-typed': 35, 'rest-json': 120 },
    async stage(dir, sharedDir) {
      await mkdir(join(dir, '1'), { recursive: true });
      // The export has a fixed batch of 1; the rewrite (same weights) lets batching apply.
      const model = new Uint8Array(await readFile(join(sharedDir, 'models', 'yolox_nano.onnx')));
      await writeFile(join(dir, '1', 'model.onnx'), makeBatchDynamic(model));
    },
    async load(sharedDir) {
      const file = 'scene_soccer.jpg';
      const bytes = new Uint8Array(await readFile(join(sharedDir, 'images', file)));
      return {
        id: 'yolox',
        model: 'yolox',
        title: this.title,
        inputs: { images: await imageTensor(bytes, IMAGE_PRESETS.yolox) },
        outputs: { output: 'float32' },
        image: undefined,
        noImageReason: 'raw YOLOX output has no visionserve.json post-processing here',
        requestNote: `${file} letterboxed to float32 [1,3,416,416] BGR (2.1 MB); response float32 [1,3549,85]`,
      };
    },
  },
};

export interface StagedRepository {
  readonly root: string;
  readonly configFile: string;
  readonly modelPath: (id: CaseId) => string;
}

/** Stages each case as `<root>/<id>` and writes a TF Serving model config file listing them. */
export async function stageRepository(
  root: string,
  sharedDir: string,
  cases: readonly CaseId[],
): Promise<StagedRepository> {
  const names: string[] = [];
  for (const id of cases) {
    await CASES[id].stage(join(root, id), sharedDir);
    names.push(id);
    if (!CASES[id].hasImage) continue;
    // A twin that answers from the response cache (the rest-b64-cached path).
    const twin = join(root, cachedTwinName(id));
    await CASES[id].stage(twin, sharedDir);
    const vision = JSON.parse(await readFile(join(twin, 'visionserve.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    await writeFile(
      join(twin, 'visionserve.json'),
      JSON.stringify({ ...vision, responseCache: true }, null, 2),
    );
    names.push(cachedTwinName(id));
  }
  const configFile = join(root, 'models.config');
  await writeFile(
    configFile,
    `model_config_list {\n${names.map((name) => `  config { name: '${name}' base_path: '${join(root, name)}' model_platform: 'onnx' }`).join('\n')}\n}\n`,
  );
  return { root, configFile, modelPath: (id) => join(root, id, '1', 'model.onnx') };
}

/** The model name of a case's twin with `"responseCache": true`. */
export function cachedTwinName(id: string): string {
  return `${id}_cached`;
}

export function loadCase(id: CaseId, sharedDir: string): Promise<BenchCase> {
  return CASES[id].load(sharedDir);
}
