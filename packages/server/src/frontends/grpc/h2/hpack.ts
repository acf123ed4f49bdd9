/**
 * HPACK (RFC 7541) for our own HTTP/2 transport: a per-connection decoder for request header
 * blocks and a stateless encoder for response headers and trailers.
 */
export { HeaderListTooLargeError, HpackError } from './hpack-errors.js';
export {
  createHpackDecoder,
  type DynamicTableSnapshot,
  type HpackDecoder,
  type HpackDecoderOptions,
} from './hpack-decoder.js';
export { encodeHeaderBlock } from './hpack-encoder.js';
