/**
 * A request's header block, decoded and checked as RFC 9113 §8 asks of a server: pseudo-header
 * fields (known, not repeated, before the regular ones, `:method`, `:scheme` and `:path`
 * present, `:path` not empty), field names in lower case, no connection-specific fields, `te`
 * only as `trailers`, no NUL, CR or LF in a value, and a content-length that is one decimal
 * number. What a malformed request means (a stream error) is left to the endpoint.
 */
import { HeaderListTooLargeError } from './hpack-errors.js';
import type { HpackDecoder } from './hpack-decoder.js';

/** A decoded request header block (decodeRequestHead). */
export interface RequestHead {
  /** The fields by name; repeated names joined with ", ". */
  readonly headers: Record<string, string>;
  /** The list passed the decoder's SETTINGS_MAX_HEADER_LIST_SIZE (the fields past it are missing). */
  readonly tooLarge: boolean;
  /** A rule of RFC 9113 §8.2-8.3 is broken (or the block's priority named its own stream). */
  readonly malformed: boolean;
  /** `:method`, `:scheme` and `:path` are all present. */
  readonly complete: boolean;
}

const CONNECTION_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** Request pseudo-headers, one bit each; :method, :scheme and :path are required (:authority is not). */
const PSEUDO_HEADER_BITS: Readonly<Record<string, number>> = Object.assign(Object.create(null) as object, {
  ':method': 1,
  ':scheme': 2,
  ':path': 4,
  ':authority': 8,
});
const REQUIRED_PSEUDO_HEADERS = 1 | 2 | 4;
const PATH_BIT = 4;
/** NUL, CR and LF are never valid in a field value (RFC 9113 §8.2.1). */
const FORBIDDEN_VALUE_CHARS = /[\0\r\n]/;
/** parseContentLength's answer for a content-length that is not one decimal number. */
export const INVALID_CONTENT_LENGTH = -2;

/** A request's content-length: -1 when absent, INVALID_CONTENT_LENGTH when not a decimal number. */
export function parseContentLength(value: string | undefined): number {
  if (value === undefined) return -1;
  if (!/^[0-9]{1,15}$/.test(value)) return INVALID_CONTENT_LENGTH;
  return Number(value);
}

function hasUpperCase(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return true;
  }
  return false;
}

/**
 * Decodes `block` with the connection's `decoder` (whose dynamic table it updates, also for a
 * malformed request) and checks the fields. Throws what the decoder throws for a broken block
 * (a connection error) except HeaderListTooLargeError, which is `tooLarge`.
 */
export function decodeRequestHead(
  decoder: HpackDecoder,
  block: Uint8Array,
  selfDependent: boolean,
): RequestHead {
  const headers = Object.create(null) as Record<string, string>;
  let tooLarge = false;
  // A stream depending on itself: a stream error, but the block is still decoded.
  let malformed = selfDependent;
  let regular = false;
  let pseudo = 0;
  try {
    decoder.decode(block, (name, value) => {
      if (name.charCodeAt(0) === 0x3a) {
        const bit = PSEUDO_HEADER_BITS[name] ?? 0;
        // Unknown, repeated, or after a regular field: malformed (RFC 9113 §8.3).
        if (regular || bit === 0 || (pseudo & bit) !== 0) malformed = true;
        // An empty :path is malformed too (RFC 9113 §8.3.1).
        if (bit === PATH_BIT && value.length === 0) malformed = true;
        pseudo |= bit;
      } else {
        regular = true;
        if (hasUpperCase(name) || CONNECTION_HEADERS.has(name) || (name === 'te' && value !== 'trailers')) {
          malformed = true;
        }
      }
      if (FORBIDDEN_VALUE_CHARS.test(value)) malformed = true;
      const had = headers[name];
      headers[name] = had === undefined ? value : `${had}, ${value}`;
    });
  } catch (error) {
    if (!(error instanceof HeaderListTooLargeError)) throw error;
    tooLarge = true;
  }
  const complete = (pseudo & REQUIRED_PSEUDO_HEADERS) === REQUIRED_PSEUDO_HEADERS;
  return { headers, tooLarge, malformed, complete };
}
