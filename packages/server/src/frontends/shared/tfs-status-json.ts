/**
 * Proto3-JSON shapes of TF Serving's GetModelStatusResponse and GetModelMetadataResponse
 * (docs/apis.md): int64 as strings, enum names, primitive fields always printed.
 */
import { Code, mapValues, tfDataTypeName } from '@visionserve/protocol';
import { type VersionStatus, versionStatusMessage } from '../../core/model-state.js';
import type { Signature, TensorSpec } from '../../core/signature.js';

export function modelStatusJson(statuses: readonly VersionStatus[]): unknown {
  return {
    model_version_status: statuses.map((s) => ({
      version: String(s.version),
      state: s.state,
      status: {
        error_code: s.error ? (Code[s.error.code] ?? 'UNKNOWN') : 'OK',
        error_message: versionStatusMessage(s),
      },
    })),
  };
}

function tensorInfoJson(spec: TensorSpec): unknown {
  return {
    name: spec.name,
    dtype: tfDataTypeName(spec.dtype),
    tensor_shape:
      spec.shape === undefined
        ? { dim: [], unknown_rank: true }
        : { dim: spec.shape.map((d) => ({ size: String(d), name: '' })), unknown_rank: false },
  };
}

/** What metadata needs of a servable: its name, version and signatures. */
interface ServableFacts {
  readonly name: string;
  readonly version: number;
  readonly signatures: Readonly<Record<string, Signature>>;
  readonly unservedSignatures?: Readonly<Record<string, string>> | undefined;
}

export function modelMetadataJson(servable: ServableFacts): unknown {
  return {
    model_spec: { name: servable.name, signature_name: '', version: String(servable.version) },
    metadata: {
      signature_def: {
        signature_def: mapValues(servable.signatures, (sig) => ({
          inputs: mapValues(sig.inputs, tensorInfoJson),
          outputs: mapValues(sig.outputs, tensorInfoJson),
          method_name: sig.methodName,
        })),
      },
      // Ours (partial loads): the SavedModel signatures left out, with the reason.
      ...(servable.unservedSignatures === undefined
        ? {}
        : { unserved_signatures: servable.unservedSignatures }),
    },
  };
}
