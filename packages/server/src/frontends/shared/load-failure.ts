import { Code, ServingError } from '@visionserve/protocol';

/**
 * A model load asked for by a client (KServe repository load, SageMaker `POST /models`) failed
 * with `failure` (the version's load error): the error the client gets. Failures that are the
 * caller's to fix keep their code — INVALID_ARGUMENT (the model directory's own files are
 * invalid: visionserve.json, labels) and PERMISSION_DENIED (a version directory or model file
 * that leaves the model directory through a symlink: the one confinement, checked for every
 * load from the model roots before any file is read) — a model file the runtime cannot read
 * (DATA_LOSS in the model status) is `unreadable` (KServe: FAILED_PRECONDITION, HTTP 400, as
 * Triton refuses a model it cannot load; SageMaker: the container's 500), anything else INTERNAL.
 */
export function clientLoadFailure(
  failure: { readonly code: Code },
  message: string,
  unreadable: Code = Code.INTERNAL,
): ServingError {
  const kept = failure.code === Code.INVALID_ARGUMENT || failure.code === Code.PERMISSION_DENIED;
  return new ServingError(
    kept ? failure.code : failure.code === Code.DATA_LOSS ? unreadable : Code.INTERNAL,
    message,
  );
}
