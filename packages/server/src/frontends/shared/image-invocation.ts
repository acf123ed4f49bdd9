import { encodeTfsPredictResponse } from '@visionserve/protocol';
import type { ImageConfig } from '@visionserve/vision';
import type { CallOptions, Servable } from '../../core/inference-service.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { ConcurrencyLimit } from './concurrency-limit.js';
import { predictImage } from './image-predict.js';

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
  if (prediction.kind === 'raw') return encodeTfsPredictResponse(prediction.outputs, 'row');
  return Buffer.from(JSON.stringify({ predictions: prediction.predictions }));
}
