/**
 * Canonical status codes (gRPC / absl numbering, as TF Serving uses) and the one
 * error type every layer throws.
 */
export enum Code {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  UNAUTHENTICATED = 16,
}

/**
 * Why an error needs a protocol-specific answer beyond its code: HTTP frontends map a
 * reason to a status in their override tables (e.g. `body-too-large` -> 413,
 * `unsupported-media-type` -> 415); gRPC and clients only see the code.
 */
export type ErrorReason =
  /** A request body over a size limit (HTTP 413). */
  | 'body-too-large'
  /** A Content-Type or Accept the endpoint cannot serve (HTTP 415). */
  | 'unsupported-media-type'
  /** A model-count or memory limit refused a model load (SageMaker multi-model: 507). */
  | 'insufficient-storage'
  /** A model load took longer than allowed (SageMaker multi-model: 408). */
  | 'load-timeout'
  /** Admission control refused the request before it was read (HTTP 503 with Retry-After). */
  | 'overloaded'
  /** A request body arrived slower than the minimum upload rate (HTTP 408, connection closed). */
  | 'body-too-slow'
  /** A request Content-Encoding the endpoint cannot decode (400 by default; KServe/Triton: 501). */
  | 'unsupported-content-encoding';

/** An error with a canonical code. Its message is safe to send to clients. */
export class ServingError extends Error {
  readonly code: Code;
  /** Set when a protocol answers this error with a status of its own (see ErrorReason). */
  readonly reason: ErrorReason | undefined;
  constructor(code: Code, message: string, options?: { cause?: unknown; reason?: ErrorReason }) {
    super(message, options);
    this.name = 'ServingError';
    this.code = code;
    this.reason = options?.reason;
  }
}

/**
 * UNAVAILABLE from an overloaded server (reason `overloaded`), built without a stack trace:
 * under overload most requests end in one, its status and message are the whole answer, and
 * capturing the stack was about a tenth of a refusal's CPU.
 */
export function overloadedError(message: string): ServingError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new ServingError(Code.UNAVAILABLE, message, { reason: 'overloaded' });
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** Shorthands for the common codes. */
export const invalidArgument = (message: string): ServingError =>
  new ServingError(Code.INVALID_ARGUMENT, message);
export const notFound = (message: string): ServingError => new ServingError(Code.NOT_FOUND, message);
export const unimplemented = (message: string): ServingError => new ServingError(Code.UNIMPLEMENTED, message);
export const unavailable = (message: string): ServingError => new ServingError(Code.UNAVAILABLE, message);
export const internal = (message: string): ServingError => new ServingError(Code.INTERNAL, message);

/** HTTP status for a code, identical to TF Serving's ToHTTPStatusCode. */
export function httpStatusFor(code: Code): number {
  switch (code) {
    case Code.OK:
      return 200;
    case Code.CANCELLED:
      return 499;
    case Code.INVALID_ARGUMENT:
    case Code.FAILED_PRECONDITION:
    case Code.OUT_OF_RANGE:
      return 400;
    case Code.DEADLINE_EXCEEDED:
      return 504;
    case Code.NOT_FOUND:
      return 404;
    case Code.ALREADY_EXISTS:
    case Code.ABORTED:
      return 409;
    case Code.PERMISSION_DENIED:
      return 403;
    case Code.RESOURCE_EXHAUSTED:
      return 429;
    case Code.UNIMPLEMENTED:
      return 501;
    case Code.UNAVAILABLE:
      return 503;
    case Code.UNAUTHENTICATED:
      return 401;
    case Code.UNKNOWN:
    case Code.INTERNAL:
    case Code.DATA_LOSS:
      return 500;
  }
}

/** Canonical code for an HTTP status (the inverse used by clients). */
export function codeForHttpStatus(status: number): Code {
  switch (status) {
    case 200:
      return Code.OK;
    case 400:
      return Code.INVALID_ARGUMENT;
    case 401:
      return Code.UNAUTHENTICATED;
    case 403:
      return Code.PERMISSION_DENIED;
    case 404:
      return Code.NOT_FOUND;
    case 409:
      return Code.ABORTED;
    case 429:
      return Code.RESOURCE_EXHAUSTED;
    case 499:
      return Code.CANCELLED;
    case 501:
      return Code.UNIMPLEMENTED;
    case 503:
      return Code.UNAVAILABLE;
    case 504:
      return Code.DEADLINE_EXCEEDED;
    default:
      return status >= 500 ? Code.INTERNAL : Code.UNKNOWN;
  }
}

/** Converts anything thrown into a ServingError; unknown errors become INTERNAL with a generic message. */
export function toServingError(error: unknown): ServingError {
  if (error instanceof ServingError) return error;
  return new ServingError(Code.INTERNAL, 'Internal error', { cause: error });
}

const GRPC_MESSAGE_LIMIT = 1024;

/** Cuts a message to TF Serving's gRPC limit (1024 characters + "...TRUNCATED"). */
export function truncateForGrpc(message: string): string {
  return message.length > GRPC_MESSAGE_LIMIT
    ? `${message.slice(0, GRPC_MESSAGE_LIMIT)}...TRUNCATED`
    : message;
}

/** The Code for a wire number (gRPC status); unknown numbers become UNKNOWN. */
export function codeFromNumber(n: number): Code {
  const name = Code[n] as keyof typeof Code | undefined;
  return name === undefined ? Code.UNKNOWN : Code[name];
}
