import { type Tensor, encodeTfsPredictResponse } from '@visionserve/protocol';
import type { ImageConfig } from '@visionserve/vision';
import type { CallOptions, Servable } from '../../core/inference-service.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { ConcurrencyLimit } from './concurrency-limit.js';
import {
  type ImagePrediction,
  imageInputAlias,
  predictImage,
  predictPostprocessed,
} from './image-predict.js';

/** An invocation answer's body: `{"predictions": [...]}`, or the raw outputs in TF Serving's row format. */
function invocationBody(prediction: ImagePrediction): Uint8Array {
  if (prediction.kind === 'raw') return encodeTfsPredictResponse(prediction.outputs, 'row');
  return Buffer.from(JSON.stringify({ predictions: prediction.predictions }));
}

/**
 * An image request without user code, on one pinned version (see predictImage), as SageMaker's
 * `/invocations` and the frame streams answer it:
 * `{"predictions": [...]}`: top-k classes or detections per instance, or the raw outputs
 * (TF Serving row format) without post-processing.
 */
export async function runImageInvocation(
  servable: Servable<ServableAssets>,
  image: ImageConfig,
  body: Uint8Array,
  call: CallOptions,
  decodes: ConcurrencyLimit,
): Promise<Uint8Array> {
  const { prediction } = await predictImage(servable, image, body, call, decodes);
  return invocationBody(prediction);
}

/**
 * A frame stream's raw tensor frame: the tensor goes to the image input (`image.input`, else
 * the model's only input) as it is, no decoding, and is answered as runImageInvocation answers
 * an image. A detector's `box_pixels` are in the tensor's own pixels (its height and width by
 * the image config's layout, NHWC by default); a tensor that is not 4-D gets none.
 */
export async function runTensorInvocation(
  servable: Servable<ServableAssets>,
  tensor: Tensor,
  call: CallOptions,
): Promise<Uint8Array> {
  const image = servable.assets.vision.config?.image;
  const input = imageInputAlias(servable, image);
  const size = tensorImageSize(tensor, image?.layout ?? 'NHWC');
  const { prediction } = await predictPostprocessed(servable, input, tensor, size, call);
  return invocationBody(prediction);
}

function tensorImageSize(
  tensor: Tensor,
  layout: 'NHWC' | 'NCHW',
): { width: number; height: number } | undefined {
  if (tensor.shape.length !== 4) return undefined;
  const [h, w] =
    layout === 'NCHW' ? [tensor.shape[2]!, tensor.shape[3]!] : [tensor.shape[1]!, tensor.shape[2]!];
  return { width: w, height: h };
}
