/**
 * The header blocks this server sends. The HPACK encoder is stateless (no dynamic table), so
 * a block encodes once and can be sent on any connection: the blocks of every OK response
 * are constants.
 */
import { encodeHeaderBlock } from '@visionserve/h2';
import { NOT_GRPC_TEXT } from '../call-stream.js';

/** Response headers of every call that gets a message. */
export const RESPONSE_HEAD = encodeHeaderBlock([
  [':status', '200'],
  ['content-type', 'application/grpc'],
  ['grpc-accept-encoding', 'identity, gzip, deflate'],
]);

/** Trailers of an OK call. */
export const OK_TRAILERS = encodeHeaderBlock([
  ['grpc-status', '0'],
  ['grpc-message', ''],
]);

/** Trailers of a call whose headers were sent (a streaming call): `message` as trailersOnlyBlock takes it. */
export function trailersBlock(code: number, message: string): Uint8Array {
  if (code === 0 && message === '') return OK_TRAILERS;
  return encodeHeaderBlock([
    ['grpc-status', String(code)],
    ['grpc-message', spaceSafe(message)],
  ]);
}

/** A field value with a space at either end encoded (peers drop such whitespace, RFC 9113 8.2.1). */
function spaceSafe(message: string): string {
  if (message.startsWith(' ')) message = `%20${message.slice(1)}`;
  if (message.endsWith(' ')) message = `${message.slice(0, -1)}%20`;
  return message;
}

/**
 * A trailers-only answer: headers and status in one block. `message` is already
 * percent-encoded; a space at either end is encoded too (peers drop a field value that
 * starts or ends with whitespace, RFC 9113 8.2.1).
 */
export function trailersOnlyBlock(code: number, message: string): Uint8Array {
  return encodeHeaderBlock([
    [':status', '200'],
    ['content-type', 'application/grpc'],
    ['grpc-status', String(code)],
    ['grpc-message', spaceSafe(message)],
  ]);
}

/** The answer to a request that is not gRPC. */
export const UNSUPPORTED_MEDIA_TYPE = encodeHeaderBlock([
  [':status', '415'],
  ['content-type', 'text/plain'],
]);

/** Its body. */
export const NOT_GRPC_BODY: Uint8Array = Buffer.from(NOT_GRPC_TEXT);
