/**
 * HTTP/2 wire pieces shared by the server's own transport and the client's: frame facts and
 * writers (RFC 9113), the frame reader, and HPACK (RFC 7541): a per-connection decoder for
 * header blocks and a stateless encoder.
 */
export * from './frame.js';
export { type FrameSink, FrameReader } from './frame-reader.js';
export { HeaderListTooLargeError, HpackError } from './hpack-errors.js';
export {
  createHpackDecoder,
  type DynamicTableSnapshot,
  type HpackDecoder,
  type HpackDecoderOptions,
} from './hpack-decoder.js';
export { encodeHeaderBlock } from './hpack-encoder.js';
export { decodeHuffman, encodeHuffman, huffmanEncodedLength } from './hpack-huffman.js';
export { STATIC_NAMES, STATIC_TABLE_LENGTH, STATIC_VALUES, staticName } from './hpack-static-table.js';
export {
  ConnectionCore,
  type ConnectionCoreOptions,
  type ConnectionEndpoint,
  H2ConnectionError,
  type SendStream,
  readGoaway,
  readResetStream,
} from './connection-core.js';
export { FloodGuard } from './flood-guard.js';
export { type HeaderBlock, HeaderBlockAssembler } from './header-block.js';
export { ReceiveWindow } from './receive-window.js';
export {
  INVALID_CONTENT_LENGTH,
  type RequestHead,
  decodeRequestHead,
  parseContentLength,
} from './request-head.js';
