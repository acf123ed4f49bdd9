import {
  encodeTfsPredictResponse,
  invalidArgument,
  parseTfsPredictBody,
  tfsJsonToTensors,
} from '@visionserve/protocol';
import type { CallOptions, InferenceService, ModelSpec, Servable } from '../../core/inference-service.js';
import { unservedNote } from '../../core/session.js';

/**
 * Runs a TF Serving REST predict body (already JSON-parsed) on a pinned version and
 * returns the encoded JSON response: the JSON is typed by the signature of the very
 * version that then runs it. Shared by the TF Serving REST frontend and /invocations.
 */
export async function predictTfsJsonOn(
  servable: Servable<unknown>,
  body: unknown,
  call: CallOptions,
): Promise<Uint8Array> {
  const parsed = parseTfsPredictBody(body);
  const requested = parsed.signatureName ?? '';
  if (requested !== '' && !Object.hasOwn(servable.signatures, requested)) {
    // TF Serving's REST path looks the signature up to type the JSON and answers with this
    // wording and code (its gRPC Predict says FAILED_PRECONDITION `Serving signature key ...`).
    throw invalidArgument(
      `Serving signature name: "${requested}" not found in signature def${unservedNote(servable.unservedSignatures, requested)}`,
    );
  }
  const { name, signature } = servable.signature(parsed.signatureName);
  const inputs = tfsJsonToTensors(parsed.format, parsed.value, signature.inputs);
  const outputs = await servable.predict({ inputs, signatureName: name }, call);
  return encodeTfsPredictResponse(outputs, parsed.format);
}

/**
 * `POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict`: one scoped core call
 * around predictTfsJsonOn.
 */
export function predictTfsJson(
  service: InferenceService,
  model: Omit<ModelSpec, 'signatureName'>,
  body: unknown,
  call: CallOptions,
): Promise<Uint8Array> {
  return service.withServable(model, (servable) => predictTfsJsonOn(servable, body, call), call);
}
