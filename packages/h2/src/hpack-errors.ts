/**
 * The two ways an HPACK header block can fail to decode (RFC 7541, RFC 7540 §4.3, §6.5.2). Kept
 * apart from the decoder so the Huffman and table code can raise them too.
 */

/** A malformed header block: the connection must end with GOAWAY COMPRESSION_ERROR (RFC 7540 §4.3). */
export class HpackError extends Error {
  override readonly name = 'HpackError';
}

/**
 * A header block that decoded correctly but whose header list exceeds maxHeaderListBytes: a
 * stream error only (the dynamic table was kept in sync; the connection may go on).
 */
export class HeaderListTooLargeError extends Error {
  override readonly name = 'HeaderListTooLargeError';
}
