import { Code } from '@visionserve/protocol';

/**
 * The code a model-loading operation (KServe repository load, SageMaker multi-model load)
 * answers when the model did not become available, from the code its version failed with
 * (kept in the model status as it is): the model's own files are the caller's problem, not
 * the server's. INVALID_ARGUMENT stays (its config files are invalid); DATA_LOSS, a model file
 * the runtime cannot read, is FAILED_PRECONDITION (HTTP 400); anything else INTERNAL.
 */
export function loadOperationCode(versionCode: Code): Code {
  if (versionCode === Code.INVALID_ARGUMENT) return Code.INVALID_ARGUMENT;
  if (versionCode === Code.DATA_LOSS) return Code.FAILED_PRECONDITION;
  return Code.INTERNAL;
}
