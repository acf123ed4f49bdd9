/** The gRPC status a response's headers or trailers carry (grpc-status, percent-decoded grpc-message). */
import { Code, ServingError, codeFromNumber } from '@visionserve/protocol';

export function grpcStatusFrom(
  headers: Readonly<Record<string, string | string[] | undefined>>,
): { code: Code; message: string } | undefined {
  const raw = headers['grpc-status'];
  if (raw === undefined) return undefined;
  const n = Number(Array.isArray(raw) ? raw[0] : raw);
  const code = codeFromNumber(n);
  const msg = headers['grpc-message'];
  let message = typeof msg === 'string' ? msg : '';
  try {
    message = decodeURIComponent(message);
  } catch {
    // keep the raw text
  }
  return { code, message };
}

/**
 * The gRPC code of a response whose HTTP status is not 200 (the mapping in gRPC's
 * http-grpc-status-mapping, plus gRPC-web's 413): 400 INTERNAL, 401 UNAUTHENTICATED,
 * 403 PERMISSION_DENIED, 404 UNIMPLEMENTED, 413 RESOURCE_EXHAUSTED, 429 / 502 / 503 / 504
 * UNAVAILABLE, anything else UNKNOWN. Used by every gRPC channel (HTTP/2 and gRPC-web).
 */
export function codeOfHttpStatus(status: unknown): Code {
  switch (Number(status)) {
    case 400:
      return Code.INTERNAL;
    case 401:
      return Code.UNAUTHENTICATED;
    case 403:
      return Code.PERMISSION_DENIED;
    case 404:
      return Code.UNIMPLEMENTED;
    case 413:
      return Code.RESOURCE_EXHAUSTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return Code.UNAVAILABLE;
    default:
      return Code.UNKNOWN;
  }
}

/**
 * How a unary call ended, once its response is over and no error cut it short: the message
 * (`takeMessage`, only for status OK), or the error its status or its bytes amount to.
 */
export function unaryOutcome(
  status: { readonly code: Code; readonly message: string } | undefined,
  takeMessage: () => Uint8Array | ServingError,
): Uint8Array | ServingError {
  if (!status) return new ServingError(Code.INTERNAL, 'Response ended without a gRPC status');
  if (status.code !== Code.OK) return new ServingError(status.code, status.message);
  return takeMessage();
}
