import { Code, ServingError, encodeTfsPredictResponse } from '@visionserve/protocol';
import { type ImageConfig, classifyTopK, decodeDetections, detectionOutputNames } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import type { CallOptions, Servable } from '../../core/inference-service.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { ConcurrencyLimit } from '../shared/concurrency-limit.js';

/**
 * An image request without user code, on one pinned version: decode and lay out the
 * image with the version's `visionserve.json` image config, predict, then apply the
 * configured post-processing. Answers `{"predictions": [...]}`: top-k classes or
 * detections per instance, or the raw outputs (TF Serving row format) without
 * post-processing.
 */
export async function runImageInvocation(
  servable: Servable<ServableAssets>,
  image: ImageConfig,
  body: Uint8Array,
  call: CallOptions,
  decodes: ConcurrencyLimit,
): Promise<Uint8Array> {
  const { config, labels } = servable.assets.vision;
  const { signature } = servable.signature();
  const inputAliases = Object.keys(signature.inputs);
  const input = image.input ?? (inputAliases.length === 1 ? inputAliases[0]! : undefined);
  if (input === undefined || !Object.hasOwn(signature.inputs, input)) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `visionserve.json image.input must name one of the model's inputs (${inputAliases.join(', ')})`,
    );
  }
  // Bounded: each decode holds the full-size pixels (and the float tensor) in memory.
  const decoded = await decodes.run(() => imageToTensor(body, image));
  const expected = signature.inputs[input]!.dtype;
  if (decoded.tensor.dtype !== expected) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `visionserve.json image.dtype gives ${decoded.tensor.dtype} but input "${input}" is ${expected}`,
    );
  }
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
  const outputs = await servable.predict({ inputs: { [input]: decoded.tensor }, outputFilter }, call);
  if (post === undefined) return encodeTfsPredictResponse(outputs, 'row');
  const predictions =
    post.kind === 'classification'
      ? classifyTopK(outputs[outputFilter![0]!]!, post, labels)
      : decodeDetections(outputs, post, labels, {
          width: decoded.originalWidth,
          height: decoded.originalHeight,
        });
  return Buffer.from(JSON.stringify({ predictions }));
}
