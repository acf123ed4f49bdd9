/**
 * The input adapter core calls for signatures whose client inputs are not the model's own
 * (core/signature.ts SignatureAdapter): serialized tf.Examples are parsed into feature
 * tensors; encoded images are decoded with the version's visionserve.json image config and
 * stacked into one batch. Shared by every protocol through core.
 */
import {
  Code,
  ServingError,
  type Tensor,
  allocate,
  examplesToTensors,
  invalidArgument,
  isStringData,
  mapValues,
} from '@visionserve/protocol';
import { denseExamplesToTensors, parseSerializedExample } from '@visionserve/protocol/tfs-proto';
import type { ImageConfig } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { InputAdapter } from '../../core/create-inference-service.js';
import type { ConcurrencyLimit } from './concurrency-limit.js';

/** Most encoded images one request may carry. */
export const MAX_IMAGES_PER_REQUEST = 1024;

/**
 * Decodes encoded images into one batch tensor `[n, ...]` laid out per `image`. Every
 * image must come out the same size (a config without width/height keeps each image's
 * own size, so only equal-sized images batch). INVALID_ARGUMENT for bytes that are not
 * an image, naming the element.
 */
export async function decodeImageBatch(
  images: readonly Uint8Array[],
  image: ImageConfig,
  decodes: ConcurrencyLimit,
  signal: AbortSignal | undefined,
): Promise<Tensor> {
  if (images.length === 0) throw invalidArgument('No images in the request');
  if (images.length > MAX_IMAGES_PER_REQUEST) {
    throw invalidArgument(`At most ${MAX_IMAGES_PER_REQUEST} images per request, got ${images.length}`);
  }
  const tensors: Tensor[] = [];
  for (let i = 0; i < images.length; i++) {
    if (signal?.aborted) throw new ServingError(Code.CANCELLED, 'Request cancelled');
    try {
      // Bounded: each decode holds the full-size pixels (and the float tensor) in memory.
      tensors.push((await decodes.run(() => imageToTensor(images[i]!, image))).tensor);
    } catch (error) {
      if (error instanceof ServingError && error.code === Code.INVALID_ARGUMENT) {
        throw invalidArgument(`Image ${i}: ${error.message}`);
      }
      throw error;
    }
  }
  const first = tensors[0]!;
  const inner = first.shape.slice(1);
  const per = first.data.length;
  for (let i = 1; i < tensors.length; i++) {
    const t = tensors[i]!;
    if (t.shape.slice(1).join('x') !== inner.join('x')) {
      throw invalidArgument(
        `Image ${i} decodes to shape [${t.shape.slice(1).join(',')}] but image 0 to [${inner.join(',')}]: set image.width and image.height in visionserve.json to batch images of different sizes`,
      );
    }
  }
  if (first.dtype === 'string') throw new ServingError(Code.INTERNAL, 'image decoded to strings');
  const data = allocate(first.dtype, per * tensors.length);
  tensors.forEach((t, i) => {
    (data as Float32Array).set(t.data as Float32Array, i * per);
  });
  return { dtype: first.dtype, shape: [tensors.length, ...inner], data };
}

function stringElements(tensor: Tensor, what: string): readonly Uint8Array[] {
  if (!isStringData(tensor.data)) throw invalidArgument(`${what} must be a string tensor`);
  return tensor.data;
}

export interface InputAdapterOptions {
  /** Image decodes in flight at once (shared with /invocations). */
  readonly imageDecodes: ConcurrencyLimit;
}

/** The InputAdapter for core (see SignatureAdapter). */
export function createInputAdapter(options: InputAdapterOptions): InputAdapter<ServableAssets> {
  return async (signature, inputs, assets, signal) => {
    const adapter = signature.adapter;
    if (adapter === undefined) return { ...inputs };
    const value = inputs[adapter.inputKey]!;
    const elements = stringElements(value, `Input "${adapter.inputKey}"`);
    if (adapter.kind === 'tf-example') {
      const tensors =
        denseExamplesToTensors(elements, adapter.features) ??
        examplesToTensors({ examples: elements.map(parseSerializedExample) }, adapter.features);
      // A scalar holds one example, parsed without a batch dimension (as TensorFlow does).
      return value.shape.length === 0
        ? mapValues(tensors, (t) => ({ ...t, shape: t.shape.slice(1) }))
        : tensors;
    }
    const image = assets.vision.config?.image;
    if (image === undefined) {
      throw new ServingError(Code.FAILED_PRECONDITION, 'The model has no image config in visionserve.json');
    }
    const batch = await decodeImageBatch(elements, image, options.imageDecodes, signal);
    return { [adapter.imageInput]: batch };
  };
}
