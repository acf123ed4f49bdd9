import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sharedModel } from './shared.js';
import { placeModel } from './model-repo.js';

import { MOBILENET_V2_VISION_CONFIG, TFOD_DETECTOR_VISION_CONFIG } from '@visionserve/vision';

/** The endpoint configs of the shared test models (one definition, in vision/endpoint-presets.ts). */
export const MOBILENET_ENDPOINT_CONFIG = MOBILENET_V2_VISION_CONFIG;
export const DETECTOR_ENDPOINT_CONFIG = TFOD_DETECTOR_VISION_CONFIG;

/** MobileNetV2 version 1 with its endpoint config and labels; returns the base path. */
export async function placeMobilenet(root: string, name = 'mobilenet'): Promise<string> {
  const base = await placeModel(root, name, 1, sharedModel('mobilenetv2-12-int8.onnx'));
  await copyFile(sharedModel('imagenet_synset.txt'), join(base, 'imagenet_synset.txt'));
  await writeFile(join(base, 'visionserve.json'), JSON.stringify(MOBILENET_ENDPOINT_CONFIG, null, 2));
  return base;
}

/** The YOLOX TF-OD detector version 1 with its endpoint config and label map; returns the base path. */
export async function placeDetector(root: string, name = 'detector'): Promise<string> {
  const base = await placeModel(root, name, 1, sharedModel('yolox_nano_tfod.onnx'));
  await copyFile(sharedModel('mscoco_label_map.pbtxt'), join(base, 'mscoco_label_map.pbtxt'));
  await writeFile(join(base, 'visionserve.json'), JSON.stringify(DETECTOR_ENDPOINT_CONFIG, null, 2));
  return base;
}

/** Writes `<base>/code/<file>` (a handler module). */
export async function writeHandler(base: string, file: string, source: string): Promise<void> {
  await mkdir(join(base, 'code'), { recursive: true });
  await writeFile(join(base, 'code', file), source);
}

export interface HttpResult {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
  json(): unknown;
}

/** One request with fetch; the body is read as text. */
export async function request(
  url: string,
  init: { method?: string; body?: string | Uint8Array; headers?: Record<string, string> } = {},
): Promise<HttpResult> {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: init.headers ?? {},
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? '',
    text,
    json: () => JSON.parse(text) as unknown,
  };
}
