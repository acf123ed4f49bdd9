import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import {
  type ClassScore,
  type DetectionResult,
  type ImageConfig,
  classifyTopK,
  decodeDetections,
  detectionOutputNames,
} from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import type { CallOptions, Servable } from '../../core/inference-service.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { ConcurrencyLimit } from './concurrency-limit.js';

/** What one image request produced, before any wire encoding. */
export type ImagePrediction =
  | { readonly kind: 'raw'; readonly outputs: Record<string, Tensor> }
  | { readonly kind: 'classification'; readonly predictions: ClassScore[][] }
  | { readonly kind: 'detection'; readonly predictions: DetectionResult[] };

export interface ImagePredictResult {
  readonly prediction: ImagePrediction;
  readonly originalWidth: number;
  readonly originalHeight: number;
  /** Where the time went, in ms: image decode + layout, the model call, post-processing. */
  readonly timings: { readonly decodeMs: number; readonly predictMs: number; readonly postprocessMs: number };
}

/** The input an image (or a frame stream's tensor) goes to: `image.input`, else the only input. */
export function imageInputAlias(servable: Servable<ServableAssets>, image: ImageConfig | undefined): string {
  const { signature } = servable.signature();
  const inputAliases = Object.keys(signature.inputs);
  const input = image?.input ?? (inputAliases.length === 1 ? inputAliases[0]! : undefined);
  if (input === undefined || !Object.hasOwn(signature.inputs, input)) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `visionserve.json image.input must name one of the model's inputs (${inputAliases.join(', ')})`,
    );
  }
  return input;
}

/**
 * An image request without user code, on one pinned version: decode and lay out the
 * image with the version's `visionserve.json` image config, predict, then apply the
 * configured post-processing (top-k classes or detections), or return the raw outputs
 * when there is none. Shared by SageMaker's image /invocations and the console's "Try it".
 */
export async function predictImage(
  servable: Servable<ServableAssets>,
  image: ImageConfig,
  body: Uint8Array,
  call: CallOptions,
  decodes: ConcurrencyLimit,
): Promise<ImagePredictResult> {
  const input = imageInputAlias(servable, image);
  const t0 = performance.now();
  // Bounded: each decode holds the full-size pixels (and the float tensor) in memory.
  const decoded = await decodes.run(() => imageToTensor(body, image));
  const expected = servable.signature().signature.inputs[input]!.dtype;
  if (decoded.tensor.dtype !== expected) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `visionserve.json image.dtype gives ${decoded.tensor.dtype} but input "${input}" is ${expected}`,
    );
  }
  const t1 = performance.now();
  const size = { width: decoded.originalWidth, height: decoded.originalHeight };
  const { prediction, predictMs, postprocessMs } = await predictPostprocessed(
    servable,
    input,
    decoded.tensor,
    size,
    call,
  );
  return {
    prediction,
    originalWidth: decoded.originalWidth,
    originalHeight: decoded.originalHeight,
    timings: { decodeMs: t1 - t0, predictMs, postprocessMs },
  };
}

/**
 * One input tensor through the model and the version's post-processing (top-k classes, or
 * detections with `box_pixels` scaled to `imageSize` when given), or the raw outputs when
 * there is none. Core validates the tensor against the input (dtype, shape).
 */
export async function predictPostprocessed(
  servable: Servable<ServableAssets>,
  input: string,
  tensor: Tensor,
  imageSize: { readonly width: number; readonly height: number } | undefined,
  call: CallOptions,
): Promise<{ prediction: ImagePrediction; predictMs: number; postprocessMs: number }> {
  const { config, labels } = servable.assets.vision;
  const { signature } = servable.signature();
  const post = config?.postprocess;
  let outputFilter: string[] | undefined;
  if (post?.kind === 'classification') {
    const outputs = Object.keys(signature.outputs);
    const output = post.output ?? (outputs.length === 1 ? outputs[0]! : undefined);
    if (output === undefined) {
      throw new ServingError(
        Code.FAILED_PRECONDITION,
        `visionserve.json postprocess.output must name one of the model's outputs (${outputs.join(', ')})`,
      );
    }
    outputFilter = [output];
  } else if (post?.kind === 'detection') {
    outputFilter = Object.values(detectionOutputNames(post)).filter((n) =>
      Object.hasOwn(signature.outputs, n),
    );
  }
  const t1 = performance.now();
  const outputs = await servable.predict({ inputs: { [input]: tensor }, outputFilter }, call);
  const t2 = performance.now();
  const prediction: ImagePrediction =
    post === undefined
      ? { kind: 'raw', outputs }
      : post.kind === 'classification'
        ? { kind: 'classification', predictions: classifyTopK(outputs[outputFilter![0]!]!, post, labels) }
        : { kind: 'detection', predictions: decodeDetections(outputs, post, labels, imageSize) };
  return { prediction, predictMs: t2 - t1, postprocessMs: performance.now() - t2 };
}
