/**
 * The encoded-image signature (TF Serving's `image_bytes` idiom): a model with an image
 * config in visionserve.json also serves a signature whose one input is DT_STRING encoded
 * images (JPEG, PNG, WebP), which the server decodes and lays out (input-adapters.ts) and
 * runs through the model's tensor signature. The composition root hands `extendSignatures`
 * to core; every protocol then sees it like any other signature.
 */
import type { ServableAssets } from '../../contracts/servable-assets.js';
import { DEFAULT_SIGNATURE_NAME, type Signature } from '../../core/signature.js';

export const DEFAULT_IMAGE_BYTES_SIGNATURE = 'serving_bytes';
export const DEFAULT_IMAGE_BYTES_INPUT = 'image_bytes';
/** The tensor signature's name when the encoded-image signature takes over serving_default. */
export const TENSOR_SIGNATURE_WHEN_BYTES_DEFAULT = 'serving_tensor';

/** Name of the encoded-image signature the assets ask for, or undefined when there is none. */
export function imageBytesSignatureName(assets: ServableAssets): string | undefined {
  const config = assets.vision.config;
  if (config?.image === undefined || config.imageBytesSignature === false) return undefined;
  return config.imageBytesSignature?.name ?? DEFAULT_IMAGE_BYTES_SIGNATURE;
}

/**
 * The signatures of a version as clients see them: the session's, plus the encoded-image
 * signature the visionserve.json asks for (see VisionConfig.imageBytesSignature). Settings
 * that do not fit the model are reported as problems and the signature is left out.
 */
export function extendSignatures(
  signatures: Readonly<Record<string, Signature>>,
  assets: ServableAssets,
): { signatures: Readonly<Record<string, Signature>>; problems: string[] } {
  const name = imageBytesSignatureName(assets);
  const config = assets.vision.config;
  if (name === undefined || config?.image === undefined) return { signatures, problems: [] };
  const settings = config.imageBytesSignature === false ? {} : (config.imageBytesSignature ?? {});
  const baseName = settings.base ?? DEFAULT_SIGNATURE_NAME;
  const inputKey = settings.input ?? 'image_bytes';
  const problem = (text: string): { signatures: typeof signatures; problems: string[] } => ({
    signatures,
    problems: [`encoded-image signature "${name}": ${text}`],
  });
  const base = signatures[baseName];
  if (base === undefined) return problem(`its base signature "${baseName}" does not exist`);
  if (base.adapter !== undefined) return problem(`its base signature "${baseName}" does not take tensors`);
  if (Object.hasOwn(signatures, name)) {
    return problem('the model already has a signature of that name (it is served as it is)');
  }
  const aliases = Object.keys(base.inputs);
  const imageInput = config.image.input ?? (aliases.length === 1 ? aliases[0] : undefined);
  if (imageInput === undefined || !Object.hasOwn(base.inputs, imageInput) || aliases.length !== 1) {
    return problem(`"${baseName}" must have exactly one input, the image (it has ${aliases.join(', ')})`);
  }
  const spec = base.inputs[imageInput]!;
  const dtype = config.image.dtype ?? 'float32';
  if (spec.dtype !== dtype) {
    return problem(`visionserve.json image.dtype is ${dtype} but input "${imageInput}" is ${spec.dtype}`);
  }
  if (spec.shape !== undefined && spec.shape.length !== 4) {
    return problem(`input "${imageInput}" has rank ${spec.shape.length}; images need rank 4`);
  }
  const bytes: Signature = {
    inputs: { [inputKey]: { name: inputKey, dtype: 'string', shape: [-1] } },
    outputs: base.outputs,
    methodName: base.methodName,
    runs: base.runs ?? baseName,
    adapter: { kind: 'encoded-image', inputKey, imageInput },
    modelInputs: base.inputs,
  };
  const out: Record<string, Signature> = { ...signatures, [name]: bytes };
  if (settings.default === true && name !== DEFAULT_SIGNATURE_NAME) {
    if (baseName === DEFAULT_SIGNATURE_NAME) {
      out[TENSOR_SIGNATURE_WHEN_BYTES_DEFAULT] = { ...base, runs: base.runs ?? DEFAULT_SIGNATURE_NAME };
    }
    out[DEFAULT_SIGNATURE_NAME] = bytes;
  }
  return { signatures: out, problems: [] };
}
