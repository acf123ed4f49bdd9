import { invalidArgument } from '@visionserve/protocol';

/**
 * Which model to call: a name (latest version, default signature) or a spec pinning a
 * version or a label (not both) and choosing a signature.
 */
export type ModelRef =
  | string
  | {
      readonly name: string;
      /** A numeric version; the latest when neither version nor label is set. */
      readonly version?: number | undefined;
      /** A version label (TF Serving `version_labels`). */
      readonly label?: string | undefined;
      /** Signature to call. Default "serving_default" (the server's default). */
      readonly signatureName?: string | undefined;
    };

/** A ModelRef with every field spelled out. */
export interface ModelSpec {
  readonly name: string;
  readonly version: number | undefined;
  readonly label: string | undefined;
  readonly signatureName: string | undefined;
}

/** Normalises and validates a ModelRef (INVALID_ARGUMENT for an empty name or version + label). */
export function modelSpec(model: ModelRef): ModelSpec {
  const spec: ModelSpec =
    typeof model === 'string'
      ? { name: model, version: undefined, label: undefined, signatureName: undefined }
      : {
          name: model.name,
          version: model.version,
          label: model.label,
          signatureName: model.signatureName,
        };
  if (spec.name === '') throw invalidArgument('Model name is empty');
  if (spec.version !== undefined && spec.label !== undefined) {
    throw invalidArgument('A model reference may pin a version or a label, not both');
  }
  if (spec.version !== undefined && !(Number.isSafeInteger(spec.version) && spec.version >= 0)) {
    throw invalidArgument(`Model version must be a non-negative integer, got ${spec.version}`);
  }
  return spec;
}

/** The TF Serving REST path prefix `/v1/models/<name>[/versions/<v>|/labels/<l>]`. */
export function restModelPath(spec: ModelSpec): string {
  let path = `/v1/models/${encodeURIComponent(spec.name)}`;
  if (spec.version !== undefined) path += `/versions/${spec.version}`;
  else if (spec.label !== undefined) path += `/labels/${encodeURIComponent(spec.label)}`;
  return path;
}
