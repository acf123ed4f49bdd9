import type { VisionAssets } from '@visionserve/vision';

/**
 * What the repository reads from a model's directory besides the model file, loaded with
 * each version and carried by its servable (TF Serving treats these as the servable's
 * assets): the vision config and labels, and the handler module of the SageMaker-style
 * endpoint. Core carries them without looking inside.
 */
export interface ServableAssets {
  readonly vision: VisionAssets;
  /** Real path of `code/inference.mjs` or `code/inference.js`, checked to lie inside the model directory. */
  readonly handlerModulePath: string | undefined;
}
