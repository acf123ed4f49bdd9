/**
 * Model metadata and model configuration in the Open Inference Protocol's JSON shapes
 * (Triton's ModelConfig field names), derived from a version's signature and assets.
 * Plain objects: the HTTP binding writes them as they are; a gRPC binding converts them
 * to the `inference` messages.
 */
import { configDataTypeName, datatypeOfDtype } from '@visionserve/protocol/kserve';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { VersionPolicy } from '../../core/model-config.js';
import { type Signature, type TensorSpec, batchesAlongDimension0 } from '../../core/signature.js';

/** Triton's platform name for ONNX Runtime models. */
export const ONNX_PLATFORM = 'onnxruntime_onnx';

export interface TensorMetadataJson {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
}

export interface ModelMetadataJson {
  readonly name: string;
  readonly versions: readonly string[];
  readonly platform: string;
  readonly inputs: readonly TensorMetadataJson[];
  readonly outputs: readonly TensorMetadataJson[];
}

/** A shape for the wire: unknown rank is sent as one variable dimension. */
const shapeOf = (spec: TensorSpec): readonly number[] => spec.shape ?? [-1];

function tensorMetadata(alias: string, spec: TensorSpec): TensorMetadataJson {
  return { name: alias, datatype: datatypeOfDtype(spec.dtype), shape: shapeOf(spec) };
}

/** `GET /v2/models/{m}[/versions/{v}]`: the signature as it is (dimension 0 included). */
export function modelMetadataJson(
  name: string,
  versions: readonly number[],
  signature: Signature,
): ModelMetadataJson {
  return {
    name,
    versions: versions.map(String),
    platform: ONNX_PLATFORM,
    inputs: Object.entries(signature.inputs).map(([alias, spec]) => tensorMetadata(alias, spec)),
    outputs: Object.entries(signature.outputs).map(([alias, spec]) => tensorMetadata(alias, spec)),
  };
}

/** What the configuration reports beyond the signature. */
export interface ModelConfigFacts {
  readonly name: string;
  readonly signature: Signature;
  readonly assets: ServableAssets | undefined;
  readonly versionPolicy: VersionPolicy | undefined;
  /** max_batch_size for batching models. */
  readonly maxBatchSize: number;
  /** Worker instances per version. */
  readonly instanceCount: number;
  /** Server-side batching is on. */
  readonly dynamicBatching: boolean;
}

/** The output alias whose classes the model's labels name, if any (visionserve.json). */
export function labelledOutput(signature: Signature, assets: ServableAssets | undefined): string | undefined {
  const post = assets?.vision.config?.postprocess;
  if (post?.kind !== 'classification' || assets?.vision.labels === undefined) return undefined;
  if (post.output !== undefined) return post.output;
  const outputs = Object.keys(signature.outputs);
  return outputs.length === 1 ? outputs[0] : undefined;
}

function versionPolicyJson(policy: VersionPolicy | undefined): unknown {
  if (policy === undefined || policy.kind === 'latest') {
    return { latest: { num_versions: policy?.numVersions ?? 1 } };
  }
  if (policy.kind === 'all') return { all: {} };
  return { specific: { versions: policy.versions } };
}

/**
 * `GET /v2/models/{m}/config`: the bare ModelConfig JSON as Triton prints it over HTTP
 * (proto field names, enum names, integers as numbers, every primitive present). No
 * `model_transaction_policy` / `response_cache` objects: perf_analyzer requires their
 * booleans whenever they are present.
 */
export function modelConfigJson(facts: ModelConfigFacts): Record<string, unknown> {
  const { signature, assets } = facts;
  const batching = batchesAlongDimension0(signature);
  const dims = (spec: TensorSpec): readonly number[] => {
    const shape = shapeOf(spec);
    return batching ? shape.slice(1) : shape;
  };
  const image = assets?.vision.config?.image;
  const imageInput =
    image === undefined
      ? undefined
      : (image.input ??
        (Object.keys(signature.inputs).length === 1 ? Object.keys(signature.inputs)[0] : undefined));
  const labelled = labelledOutput(signature, assets);
  const post = assets?.vision.config?.postprocess;
  return {
    name: facts.name,
    platform: ONNX_PLATFORM,
    backend: 'onnxruntime',
    runtime: '',
    version_policy: versionPolicyJson(facts.versionPolicy),
    max_batch_size: batching ? facts.maxBatchSize : 0,
    input: Object.entries(signature.inputs).map(([alias, spec]) => ({
      name: alias,
      data_type: configDataTypeName(spec.dtype),
      format: alias === imageInput ? `FORMAT_${image?.layout ?? 'NHWC'}` : 'FORMAT_NONE',
      dims: dims(spec),
      is_shape_tensor: false,
      optional: false,
    })),
    output: Object.entries(signature.outputs).map(([alias, spec]) => ({
      name: alias,
      data_type: configDataTypeName(spec.dtype),
      dims: dims(spec),
      label_filename: alias === labelled ? (post?.labels ?? '') : '',
      is_shape_tensor: false,
    })),
    instance_group: [{ name: facts.name, kind: 'KIND_CPU', count: facts.instanceCount, gpus: [] }],
    default_model_filename: 'model.onnx',
    ...(facts.dynamicBatching
      ? {
          dynamic_batching: {
            preferred_batch_size: [],
            max_queue_delay_microseconds: 0,
            preserve_ordering: false,
          },
        }
      : {}),
    parameters: {},
  };
}
