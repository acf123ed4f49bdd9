#!/usr/bin/env node
// Writes the peer benchmark's one request tensor: an image preprocessed once by @visionserve/vision's
// imageToTensor with MOBILENET_V2_VISION_CONFIG (what visionserve's /invocations and `visionserve
// bench`'s mobilenet case do), as raw little-endian float32 `<out>.f32` plus `<out>.json`
// ({ image, dtype, shape, bytes, sha256 }). Every server then gets exactly these bytes.
//   node bench/peers/request-tensor.mjs <image> <out-prefix>
// Needs `npm run build` first (it imports the built package).
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';

const [imagePath, out] = process.argv.slice(2);
if (!imagePath || !out) {
  console.error('usage: node bench/peers/request-tensor.mjs <image> <out-prefix>');
  process.exit(2);
}
const { tensor } = await imageToTensor(await readFile(imagePath), MOBILENET_V2_VISION_CONFIG.image);
if (tensor.dtype !== 'float32' || !(tensor.data instanceof Float32Array)) {
  throw new Error(`expected a float32 tensor, got ${tensor.dtype}`);
}
const bytes = new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
await writeFile(`${out}.f32`, bytes);
const meta = {
  image: basename(imagePath),
  dtype: tensor.dtype,
  shape: tensor.shape,
  bytes: bytes.byteLength,
  sha256: createHash('sha256').update(bytes).digest('hex'),
};
await writeFile(`${out}.json`, `${JSON.stringify(meta, null, 2)}\n`);
console.log(`request tensor: ${meta.image} -> ${meta.dtype} [${meta.shape.join(',')}] ${meta.bytes} B`);
