/**
 * Structural limits of a JSON request body, checked by one linear scan of its bytes before
 * any reader builds values from it: nesting depth, keys of one object, and values in the
 * whole body. A body past a limit is refused (INVALID_ARGUMENT) as soon as the scan reaches
 * the value that passes it, so a hostile body costs at most the bytes up to that point.
 *
 * The scan does not validate JSON (the readers do): on malformed text it still ends, in one
 * pass, with counts that are at most what a parser could build from the text.
 */
import { invalidArgument } from './errors.js';

export interface JsonLimits {
  /** Deepest nesting of lists and objects (the body's own object is level 1). */
  readonly maxDepth: number;
  /** Most keys in one object. */
  readonly maxObjectKeys: number;
  /** Most JSON values in the body: numbers, strings, literals, lists and objects. */
  readonly maxValues: number;
}

/** No limits (what a caller without a configuration gets). */
export const NO_JSON_LIMITS: JsonLimits = {
  maxDepth: Infinity,
  maxObjectKeys: Infinity,
  maxValues: Infinity,
};

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

/** The index just past the string that starts at `start` (a quote); the end of `bytes` if unclosed. */
function skipString(bytes: Uint8Array, start: number): number {
  let i = start + 1;
  while (i < bytes.length) {
    const c = bytes[i]!;
    if (c === BACKSLASH) i += 2;
    else if (c === QUOTE) return i + 1;
    else i++;
  }
  return bytes.length;
}

function tooMany(what: string, limit: number): never {
  throw invalidArgument(`JSON ${what} (limit ${limit})`);
}

/** The index of the first byte from `i` that ends a number or literal (separator, bracket, space). */
function skipScalar(bytes: Uint8Array, i: number): number {
  for (; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === COMMA || c === RBRACKET || c === RBRACE || c <= 0x20 || c === COLON) return i;
  }
  return i;
}

/**
 * Throws INVALID_ARGUMENT when `bytes` (JSON text) passes one of `limits`. Cost: one pass over
 * the bytes up to the first value past a limit.
 */
export function checkJsonLimits(bytes: Uint8Array, limits: JsonLimits): void {
  const { maxDepth, maxObjectKeys, maxValues } = limits;
  if (maxDepth === Infinity && maxObjectKeys === Infinity && maxValues === Infinity) return;
  // Per open level: whether it is an object, and its keys so far.
  const depthCap = Math.min(maxDepth, 1 << 20) + 2;
  const isObject = new Uint8Array(depthCap);
  const keys = new Float64Array(depthCap);
  let depth = 0;
  let values = 0;
  let keyNext = false;
  const end = bytes.length;
  for (let i = 0; i < end;) {
    const c = bytes[i]!;
    if (c === COMMA) {
      keyNext = isObject[depth] === 1;
      i++;
    } else if (c <= 0x20 || c === COLON) {
      i++;
    } else if (c === QUOTE) {
      if (!keyNext) {
        if (++values > maxValues) tooMany(`body has more than ${maxValues} values`, maxValues);
      } else if (++keys[depth]! > maxObjectKeys) {
        tooMany(`object with more than ${maxObjectKeys} keys`, maxObjectKeys);
      }
      keyNext = false;
      i = skipString(bytes, i);
    } else if (c === LBRACE || c === LBRACKET) {
      if (++values > maxValues) tooMany(`body has more than ${maxValues} values`, maxValues);
      if (++depth > maxDepth) tooMany(`nested deeper than ${maxDepth} levels`, maxDepth);
      isObject[depth] = c === LBRACE ? 1 : 0;
      keys[depth] = 0;
      keyNext = c === LBRACE;
      i++;
    } else if (c === RBRACE || c === RBRACKET) {
      if (depth > 0) depth--;
      keyNext = false;
      i++;
    } else {
      // A number or literal (or stray text): one value, up to the next separator.
      if (++values > maxValues) tooMany(`body has more than ${maxValues} values`, maxValues);
      keyNext = false;
      i = skipScalar(bytes, i + 1);
    }
  }
}
