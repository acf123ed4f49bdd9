/**
 * Conversions between TF Serving messages and core types (model specs, signatures,
 * version status, model configs). Pure functions; errors are ServingErrors.
 */
import { create } from '@bufbuild/protobuf';
import { Code, mapValues, invalidArgument } from '@visionserve/protocol';
import {
  dataTypeFromDType,
  shapeToProto,
  type ModelSpec as ModelSpecProto,
  type SignatureDefMap,
  SignatureDefMapSchema,
  type ModelVersionStatus,
  ModelVersionStatusSchema,
  ModelVersionStatus_State,
  type TensorInfo,
  TensorInfoSchema,
  type SignatureDef,
  SignatureDefSchema,
  TfErrorCode as ErrorCodeProto,
} from '@visionserve/protocol/tfs-proto';
import type { ModelSpec, ResolvedModel } from '../../core/inference-service.js';
import { type ModelState, type VersionStatus, versionStatusMessage } from '../../core/model-state.js';
import type { Signature, TensorSpec } from '../../core/signature.js';

/** A core ModelSpec from the request's; a missing model_spec is INVALID_ARGUMENT. */
export function modelSpecFromProto(spec: ModelSpecProto | undefined): ModelSpec {
  if (spec === undefined) throw invalidArgument('Missing model_spec');
  const choice = spec.versionChoice;
  return {
    name: spec.name,
    // The oneof makes "version and label both set" impossible on the wire.
    version: choice.case === 'version' ? toSafeInteger(choice.value.value, 'model_spec.version') : undefined,
    label: choice.case === 'versionLabel' ? choice.value : undefined,
    signatureName: spec.signatureName === '' ? undefined : spec.signatureName,
  };
}

/** The resolved model as a response model_spec; the signature name only when given. */
export function modelSpecToProto(model: ResolvedModel, signatureName?: string): ModelSpecProto {
  // The complete message as a literal: what create() returns, without its reflective walk (per response).
  return {
    $typeName: 'tensorflow.serving.ModelSpec',
    name: model.name,
    versionChoice: {
      case: 'version',
      value: { $typeName: 'google.protobuf.Int64Value', value: BigInt(model.version) },
    },
    signatureName: signatureName ?? '',
  };
}

/** SignatureDefMap for GetModelMetadata: TensorInfo name = graph tensor name, -1 for dynamic dims. */
export function signatureDefMapFromSignatures(
  signatures: Readonly<Record<string, Signature>>,
): SignatureDefMap {
  const signatureDef: Record<string, SignatureDef> = {};
  for (const [name, signature] of Object.entries(signatures)) {
    signatureDef[name] = create(SignatureDefSchema, {
      inputs: mapValues(signature.inputs, tensorInfo),
      outputs: mapValues(signature.outputs, tensorInfo),
      methodName: signature.methodName,
    });
  }
  return create(SignatureDefMapSchema, { signatureDef });
}

function tensorInfo(spec: TensorSpec): TensorInfo {
  return create(TensorInfoSchema, {
    encoding: { case: 'name', value: spec.name },
    dtype: dataTypeFromDType(spec.dtype),
    tensorShape: shapeToProto(spec.shape),
  });
}

const STATE_TO_PROTO: Readonly<Record<ModelState, ModelVersionStatus_State>> = {
  START: ModelVersionStatus_State.START,
  LOADING: ModelVersionStatus_State.LOADING,
  AVAILABLE: ModelVersionStatus_State.AVAILABLE,
  UNLOADING: ModelVersionStatus_State.UNLOADING,
  END: ModelVersionStatus_State.END,
};

/** One ModelVersionStatus; status is always present (OK with an empty message when healthy). */
export function versionStatusToProto(status: VersionStatus): ModelVersionStatus {
  return create(ModelVersionStatusSchema, {
    version: BigInt(status.version),
    state: STATE_TO_PROTO[status.state],
    status: {
      errorCode: errorCodeProto(status.error?.code ?? Code.OK),
      errorMessage: versionStatusMessage(status),
    },
  });
}

/** tensorflow.error.Code for a canonical code number (same numbering); unknown numbers -> UNKNOWN. */
export function errorCodeProto(code: number): ErrorCodeProto {
  const name = Code[code] as keyof typeof ErrorCodeProto | undefined;
  return name === undefined ? ErrorCodeProto.UNKNOWN : ErrorCodeProto[name];
}

function toSafeInteger(value: bigint, what: string): number {
  if (value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw invalidArgument(`${what}: version ${value.toString()} is out of range`);
  }
  return Number(value);
}
