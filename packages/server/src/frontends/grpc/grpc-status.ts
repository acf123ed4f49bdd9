import { Code, ServingError, truncateForGrpc } from '@visionserve/protocol';

/** The `grpc-status` and `grpc-message` trailers of an outcome. */
export interface GrpcStatus {
  readonly code: Code;
  readonly message: string;
}

/** A ServingError keeps its code and a message cut to TF Serving's 1024 characters; anything else is INTERNAL. */
export function statusOf(error: unknown): GrpcStatus {
  if (error instanceof ServingError) return { code: error.code, message: truncateForGrpc(error.message) };
  return { code: Code.INTERNAL, message: 'Internal error' };
}

/**
 * Most characters of an encoded `grpc-message`: the ServingError text is already cut to
 * 1024 characters (statusOf), but percent-encoding can make that up to 9x longer; the cap
 * keeps every status header block small (well under a 16 KiB HTTP/2 frame).
 */
export const MAX_GRPC_MESSAGE_CHARS = 4096;

/**
 * `grpc-message` is percent-encoded: bytes outside printable ASCII, and '%' itself, as
 * %XX of their UTF-8 encoding (the gRPC HTTP/2 protocol); cut to MAX_GRPC_MESSAGE_CHARS
 * at a character boundary (never inside an escape or a character's UTF-8 bytes).
 */
export function encodeGrpcMessage(message: string): string {
  let plain = true;
  for (let i = 0; i < message.length; i++) {
    const c = message.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain)
    return message.length > MAX_GRPC_MESSAGE_CHARS ? message.slice(0, MAX_GRPC_MESSAGE_CHARS) : message;
  let out = '';
  for (const char of message) {
    const c = char.charCodeAt(0);
    let encoded = char;
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      encoded = '';
      for (const byte of Buffer.from(char, 'utf8')) {
        encoded += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
      }
    }
    if (out.length + encoded.length > MAX_GRPC_MESSAGE_CHARS) break;
    out += encoded;
  }
  return out;
}

const UNIT_MS: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1000,
  m: 1,
  u: 1e-3,
  n: 1e-6,
};

/**
 * The relative deadline of a `grpc-timeout` header (at most 8 digits and a unit), in ms;
 * undefined when absent; INVALID_ARGUMENT when malformed.
 */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value[0] : value;
  const m = /^(\d{1,8})([HMSmun])$/.exec(text ?? '');
  if (m === null) throw new ServingError(Code.INVALID_ARGUMENT, `Malformed grpc-timeout: ${String(text)}`);
  return Number(m[1]) * UNIT_MS[m[2]!]!;
}
