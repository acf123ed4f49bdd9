/**
 * Protobuf encoding and decoding for the TF Serving gRPC client. Loaded lazily by
 * tfs-grpc-client.ts on the first call: it pulls in @bufbuild/protobuf and the generated
 * messages, which the rest of the client does not need.
 */
import { type MessageInitShape, create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import {
  Code,
  type DType,
  ServingError,
  type Tensor,
  codeFromNumber,
  mapValues,
} from '@visionserve/protocol';
import {
  DataType,
  GetModelMetadataRequestSchema,
  GetModelMetadataResponseSchema,
  GetModelStatusRequestSchema,
  GetModelStatusResponseSchema,
  type ModelConfigSchema,
  type ModelSpec as ModelSpecProto,
  ModelSpecSchema,
  ModelVersionStatus_State,
  PredictRequestSchema,
  ReloadConfigRequestSchema,
  ReloadConfigResponseSchema,
  SignatureDefMapSchema,
  type TensorInfo as TensorInfoProto,
  decodePredictResponseFast,
  dtypeFromDataType,
  writePredictRequest,
} from '@visionserve/protocol/tfs-proto';
import type { ModelSpec } from './model-ref.js';
import type {
  ModelMetadata,
  ModelVersionStatus,
  ResolvedModel,
  SignatureInfo,
  TensorInfo,
} from './results.js';
import type { ModelConfigEntry } from './model-config-entry.js';

/** Encodes a PredictRequest as chunks whose concatenation is the message (tensor bytes are not copied). */
export function encodePredictRequest(
  spec: ModelSpec,
  inputs: Readonly<Record<string, Tensor>>,
  outputFilter: readonly string[],
  asTensorContent: boolean,
): Uint8Array[] {
  const head = create(PredictRequestSchema, {
    modelSpec: specToProto(spec),
    outputFilter: [...outputFilter],
  });
  return writePredictRequest(head, inputs, asTensorContent);
}

export function decodePredictResponse(
  bytes: Uint8Array,
  requested: ModelSpec,
): { outputs: Record<string, Tensor>; model: ResolvedModel } {
  // Packed float_val/double_val are lifted out as bytes (see predict-response-decoder.ts).
  const { outputs, modelSpec } = decodePredictResponseFast(bytes);
  return { outputs, model: resolvedFrom(modelSpec, requested) };
}

export function encodeMetadataRequest(spec: ModelSpec): Uint8Array {
  return toBinary(
    GetModelMetadataRequestSchema,
    create(GetModelMetadataRequestSchema, { modelSpec: specToProto(spec), metadataField: ['signature_def'] }),
  );
}

export function decodeMetadataResponse(bytes: Uint8Array, requested: ModelSpec): ModelMetadata {
  const response = fromBinary(GetModelMetadataResponseSchema, bytes);
  const packed = response.metadata['signature_def'];
  const map = packed === undefined ? undefined : anyUnpack(packed, SignatureDefMapSchema);
  if (map === undefined)
    throw new ServingError(Code.INTERNAL, 'GetModelMetadata response carries no signature_def');
  const signatures: Record<string, SignatureInfo> = {};
  for (const [name, def] of Object.entries(map.signatureDef)) {
    signatures[name] = {
      inputs: mapValues(def.inputs, tensorInfoFromProto),
      outputs: mapValues(def.outputs, tensorInfoFromProto),
      methodName: def.methodName,
    };
  }
  return { model: resolvedFrom(response.modelSpec, requested), signatures };
}

export function encodeStatusRequest(spec: ModelSpec): Uint8Array {
  return toBinary(
    GetModelStatusRequestSchema,
    create(GetModelStatusRequestSchema, { modelSpec: specToProto(spec) }),
  );
}

export function decodeStatusResponse(bytes: Uint8Array): ModelVersionStatus[] {
  const response = fromBinary(GetModelStatusResponseSchema, bytes);
  return response.modelVersionStatus.map((s) => ({
    version: Number(s.version),
    state: ModelVersionStatus_State[s.state] ?? 'UNKNOWN',
    errorCode: codeFromNumber(s.status?.errorCode ?? 0),
    errorMessage: s.status?.errorMessage ?? '',
  }));
}

export function encodeReloadRequest(models: readonly ModelConfigEntry[]): Uint8Array {
  const request = create(ReloadConfigRequestSchema, {
    config: { config: { case: 'modelConfigList', value: { config: models.map(modelConfigToProto) } } },
  });
  return toBinary(ReloadConfigRequestSchema, request);
}

/** Throws the server's status when it is not OK. */
export function checkReloadResponse(bytes: Uint8Array): void {
  const response = fromBinary(ReloadConfigResponseSchema, bytes);
  const code = codeFromNumber(response.status?.errorCode ?? 0);
  if (code !== Code.OK) throw new ServingError(code, response.status?.errorMessage ?? '');
}

function specToProto(spec: ModelSpec): ModelSpecProto {
  return create(ModelSpecSchema, {
    name: spec.name,
    signatureName: spec.signatureName ?? '',
    ...(spec.version !== undefined
      ? { versionChoice: { case: 'version', value: { value: BigInt(spec.version) } } }
      : spec.label !== undefined
        ? { versionChoice: { case: 'versionLabel', value: spec.label } }
        : {}),
  });
}

function resolvedFrom(proto: ModelSpecProto | undefined, requested: ModelSpec): ResolvedModel {
  const choice = proto?.versionChoice;
  return {
    name: proto?.name || requested.name,
    version: choice?.case === 'version' ? Number(choice.value.value) : requested.version,
  };
}

/** The dtype of a TF DataType, or undefined for types visionserve cannot hold. */
function dtypeOrUndefined(dataType: DataType): DType | undefined {
  try {
    return dtypeFromDataType(dataType);
  } catch {
    return undefined;
  }
}

function tensorInfoFromProto(info: TensorInfoProto): TensorInfo {
  const shape = info.tensorShape;
  return {
    name: info.encoding.case === 'name' ? info.encoding.value : '',
    dtype: dtypeOrUndefined(info.dtype),
    tfDtype: DataType[info.dtype] ?? String(info.dtype),
    shape: shape === undefined || shape.unknownRank ? undefined : shape.dim.map((d) => Number(d.size)),
  };
}

function modelConfigToProto(entry: ModelConfigEntry): MessageInitShape<typeof ModelConfigSchema> {
  const policy = entry.versionPolicy;
  return {
    name: entry.name,
    basePath: entry.basePath,
    modelPlatform: entry.modelPlatform ?? 'onnx',
    versionLabels: Object.fromEntries(
      Object.entries(entry.versionLabels ?? {}).map(([k, v]) => [k, BigInt(v)]),
    ),
    ...(policy === undefined
      ? {}
      : {
          modelVersionPolicy: {
            policyChoice:
              'latest' in policy
                ? { case: 'latest' as const, value: { numVersions: policy.latest } }
                : 'all' in policy
                  ? { case: 'all' as const, value: {} }
                  : { case: 'specific' as const, value: { versions: policy.specific.map((v) => BigInt(v)) } },
          },
        }),
  };
}
