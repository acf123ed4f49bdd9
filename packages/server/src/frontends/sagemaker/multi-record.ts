/**
 * Multi-record answers: a TF Serving row-format response (`{"predictions": [p0, p1, ...]}`)
 * as JSON Lines, one `{"predictions": [pi]}` per record, so that line i is exactly what
 * record i sent alone gets. Pure functions, no I/O.
 */

const OPEN = new Set([0x5b, 0x7b]); // [ {
const CLOSE = new Set([0x5d, 0x7d]); // ] }

/**
 * The byte ranges of the elements of the JSON array that starts at `start` (its `[`), and
 * the index just past its `]`. Strings (with escapes) are skipped; commas split only at
 * the array's own depth.
 */
function arrayElements(bytes: Uint8Array, start: number): { elements: [number, number][]; end: number } {
  const elements: [number, number][] = [];
  let depth = 0;
  let inString = false;
  let elementStart = start + 1;
  for (let i = start; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (OPEN.has(c)) depth++;
    else if (CLOSE.has(c)) {
      depth--;
      if (depth === 0) {
        if (hasContent(bytes, elementStart, i)) elements.push([elementStart, i]);
        return { elements, end: i + 1 };
      }
    } else if (c === 0x2c && depth === 1) {
      elements.push([elementStart, i]);
      elementStart = i + 1;
    }
  }
  throw new Error('unterminated JSON array');
}

function hasContent(bytes: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (![0x20, 0x0a, 0x0d, 0x09].includes(bytes[i]!)) return true;
  return false;
}

const CLOSE_LINE = Buffer.from(']}');
const PREFIX = /^\s*\{\s*"predictions"\s*:\s*\[/;

/**
 * `{"predictions": [p0, p1]}` -> `{"predictions":[p0]}\n{"predictions":[p1]}`: the
 * elements' own bytes, unchanged (so non-finite numbers and number formatting survive).
 * Any other shape (columnar `outputs`, other keys) is returned as one line.
 */
export function predictionsAsLines(body: Uint8Array): Uint8Array {
  const head = Buffer.from(body.subarray(0, Math.min(body.length, 64))).toString('latin1');
  const match = PREFIX.exec(head);
  if (match === null) return oneLine(body);
  const { elements, end } = arrayElements(body, match[0].length - 1);
  if (hasContent(body, end, body.length) && !/^\s*\}\s*$/.test(Buffer.from(body.subarray(end)).toString())) {
    return oneLine(body);
  }
  const parts: Uint8Array[] = [];
  elements.forEach(([from, to], i) => {
    parts.push(
      Buffer.from(`${i > 0 ? '\n' : ''}{"predictions":[`),
      oneLine(body.subarray(from, to)),
      CLOSE_LINE,
    );
  });
  return Buffer.concat(parts);
}

/** JSON text on one line: newlines (never inside JSON strings) and the indentation after them removed. */
function oneLine(body: Uint8Array): Uint8Array {
  const text = Buffer.from(body).toString('utf8');
  return text.includes('\n') ? Buffer.from(text.replace(/\r?\n\s*/g, '').trim()) : Buffer.from(text.trim());
}
