/**
 * KServe v2 errors in Triton's words (triton-inference-server/core: model_lifecycle.cc,
 * model_repository_manager.cc, infer_request.cc), so that clients and examples written
 * against Triton, which test the messages, read the same text from both transports:
 * "Request for unknown model: 'x' is not found", "[request id: <id_unknown>] unexpected
 * inference input 'q' for model 'x'", and so on. Status codes stay as the transports map them.
 */
import { Code, ServingError, invalidArgument } from '@visionserve/protocol';
import { type InferInputTensor, datatypeOfDtype } from '@visionserve/protocol/kserve';
import type { InferenceService, ModelSpec } from '../../core/inference-service.js';
import { type Signature, batchesAlongDimension0 } from '../../core/signature.js';

/**
 * A NOT_FOUND from core for `spec` (unknown model, unknown or unavailable version) in
 * Triton's words; a version that exists but is still loading becomes UNAVAILABLE (Triton
 * answers 503 for a version that is not ready). Other errors pass unchanged.
 */
export function unknownModelError(service: InferenceService, error: unknown, spec: ModelSpec): unknown {
  if (!(error instanceof ServingError) || error.code !== Code.NOT_FOUND) return error;
  const { name, version } = spec;
  let statuses;
  try {
    statuses = service.status(spec);
  } catch {
    const known = version !== undefined && modelKnown(service, name);
    return tritonError(
      Code.NOT_FOUND,
      known ? `'${name}' version ${version} is not found` : `'${name}' is not found`,
      error,
    );
  }
  const loading = (s: { state: string }): boolean => s.state === 'START' || s.state === 'LOADING';
  if (version === undefined) {
    const code = statuses.some(loading) ? Code.UNAVAILABLE : Code.NOT_FOUND;
    return tritonError(code, `'${name}' has no available versions`, error);
  }
  const entry = statuses.find((s) => s.version === version);
  if (entry !== undefined && loading(entry)) {
    return tritonError(Code.UNAVAILABLE, `'${name}' version ${version} is not at ready state`, error);
  }
  return tritonError(Code.NOT_FOUND, `'${name}' version ${version} is not found`, error);
}

function modelKnown(service: InferenceService, name: string): boolean {
  try {
    service.status({ name });
    return true;
  } catch {
    return false;
  }
}

function tritonError(code: Code, what: string, cause: ServingError): ServingError {
  return new ServingError(code, `Request for unknown model: ${what}`, { cause });
}

/** Triton's request prefix (InferenceRequest::LogRequest). */
function requestTag(id: string): string {
  return `[request id: ${id === '' ? '<id_unknown>' : id}] `;
}

const dims = (shape: readonly number[]): string => `[${shape.join(',')}]`;

/** Triton's note for a shape mismatch on a model that batches (max_batch_size > 0). */
const IMPLICIT_BATCH_NOTE =
  'NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size.';

/**
 * The request's inputs checked as Triton checks them, in its order and words: the number
 * of inputs, then each input's name, datatype and shape (-1 in the model's shape matches
 * any size). INVALID_ARGUMENT on the first problem.
 */
export function checkInputsAsTriton(
  model: string,
  requestId: string,
  signature: Signature,
  inputs: readonly InferInputTensor[],
): void {
  const tag = requestTag(requestId);
  const expected = Object.keys(signature.inputs);
  // Fewer inputs are left to core: a model input may be optional.
  if (inputs.length > expected.length) {
    const given = new Set(inputs.map((i) => i.name));
    const missing = expected.filter((n) => !given.has(n));
    const list = (names: readonly string[]): string => `[${names.map((n) => `'${n}'`).join(',')}]`;
    throw invalidArgument(
      `${tag}expected ${expected.length} inputs but got ${inputs.length} inputs for model '${model}'. Got input(s) ${list([...given])}, but missing required input(s) ${list(missing)}. Please provide all required input(s).`,
    );
  }
  for (const input of inputs) {
    const spec = Object.hasOwn(signature.inputs, input.name) ? signature.inputs[input.name] : undefined;
    if (spec === undefined) {
      throw invalidArgument(`${tag}unexpected inference input '${input.name}' for model '${model}'`);
    }
    if (spec.dtype !== input.tensor.dtype) {
      throw invalidArgument(
        `${tag}inference input '${input.name}' data-type is '${input.datatype}', but model '${model}' expects '${datatypeOfDtype(spec.dtype)}'`,
      );
    }
    const want = spec.shape;
    if (want === undefined) continue;
    const got = input.shape;
    if (want.length !== got.length || want.some((d, i) => d >= 0 && d !== got[i])) {
      const note = batchesAlongDimension0(signature) ? IMPLICIT_BATCH_NOTE : '';
      throw invalidArgument(
        `${tag}unexpected shape for input '${input.name}' for model '${model}'. Expected ${dims(want)}, got ${dims(got)}. ${note}`,
      );
    }
  }
}
