/**
 * The benchmark's cases: which model, which request, staged as a model repository.
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type DType, type Tensor } from '@visionserve/protocol';
import { rawDetectorModel } from '../tools/fixture-models.js';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';

export type CaseId = 'mobilenet' | 'raw_detector';
export const CASE_IDS: readonly CaseId[] = ['mobilenet', 'raw_detector'];

export interface BenchCase {
  readonly id: CaseId;
  /** Model name on the server (also the repository directory name). */
  readonly model: string;
  readonly title: string;
  /** Input alias -> tensor sent by every tensor path. */
  readonly inputs: Readonly<Record<string, Tensor>>;
  /** Output alias -> dtype (lets the REST client skip its metadata lookup). */
  readonly outputs: Readonly<Record<string, DType>>;
  /** Encoded image for the /invocations path; undefined when the case has none. */
  readonly image: { readonly bytes: Uint8Array; readonly file: string } | undefined;
  /** Why the case has no /invocations row, when it has none. */
  readonly noInvocationsReason?: string;
  /** Description of the request for the report. */
  readonly requestNote: string;
}

export interface StagedRepository {
  readonly root: string;
  readonly configFile: string;
  readonly modelPath: (c: BenchCase) => string;
}

/** Writes `<root>/<model>/1/model.onnx` for each case and a TF Serving model config file listing them. */
export async function stageRepository(
  root: string,
  sharedDir: string,
  cases: readonly CaseId[],
): Promise<StagedRepository> {
  for (const id of cases) {
    const dir = join(root, id, '1');
    await mkdir(dir, { recursive: true });
    if (id === 'mobilenet') {
      await copyFile(join(sharedDir, 'models', 'mobilenetv2-12-int8.onnx'), join(dir, 'model.onnx'));
      // /invocations: JPEG in, ImageNet preprocessing, softmax top-5 with labels out.
      await copyFile(join(sharedDir, 'models', 'imagenet_synset.txt'), join(root, id, 'imagenet_synset.txt'));
      await writeFile(
        join(root, id, 'visionserve.json'),
        JSON.stringify(MOBILENET_V2_VISION_CONFIG, null, 2),
      );
    } else await writeFile(join(dir, 'model.onnx'), rawDetectorModel());
  }
  const configFile = join(root, 'models.config');
  await writeFile(
    configFile,
    `model_config_list {\n${cases.map((id) => `  config { name: '${id}' base_path: '${join(root, id)}' model_platform: 'onnx' }`).join('\n')}\n}\n`,
  );
  return { root, configFile, modelPath: (c) => join(root, c.model, '1', 'model.onnx') };
}

/** Builds the case's inputs from the shared photos (sharp is loaded here, by the bench process only). */
export async function loadCase(id: CaseId, sharedDir: string): Promise<BenchCase> {
  const { imageToTensor, IMAGE_PRESETS } = await import('@visionserve/client/image');
  if (id === 'mobilenet') {
    const file = 'cat_tabby.jpg';
    const bytes = await readFile(join(sharedDir, 'images', file));
    const { tensor } = await imageToTensor(bytes, IMAGE_PRESETS.imagenet);
    return {
      id,
      model: id,
      title: 'MobileNetV2 int8 classification (small request, small response)',
      inputs: { input: tensor },
      outputs: { output: 'float32' },
      image: { bytes, file },
      requestNote: `${file} (${bytes.byteLength.toLocaleString('en-US')} B JPEG) -> float32 [1,3,224,224]; response float32 [1,1000]`,
    };
  }
  const file = 'scene_soccer.jpg';
  const bytes = await readFile(join(sharedDir, 'images', file));
  const { tensor } = await imageToTensor(bytes, {
    width: 640,
    height: 640,
    resize: 'stretch',
    layout: 'NHWC',
    dtype: 'uint8',
  });
  return {
    id,
    model: id,
    title: 'Raw detector, EfficientDet-D1-sized response (96,000 anchors × 90 classes + boxes)',
    inputs: { input_tensor: tensor },
    outputs: { raw_detection_boxes: 'float32', raw_detection_scores: 'float32' },
    image: undefined,
    noInvocationsReason: '/invocations returns post-processed top-k JSON, not raw head outputs',
    requestNote: `${file} resized to uint8 [1,640,640,3] (1.2 MB); response float32 [1,96000,4] + [1,96000,90] (9.0 M floats)`,
  };
}
