/**
 * Request bodies of the SageMaker-style /invocations without user code
 * (protocols.md B11): JSON, JSON Lines and CSV become a TF Serving REST predict body;
 * images go to the image path. Pure functions, no I/O.
 */
import { invalidArgument, parseTfsJsonText } from '@visionserve/protocol';

/** How a request body is interpreted. */
export type RequestKind = 'json' | 'jsonlines' | 'csv' | 'image';

/** Response body format chosen from Accept. */
export type ResponseKind = 'json' | 'jsonlines';

const REQUEST_KINDS: Readonly<Record<string, RequestKind>> = {
  'application/json': 'json',
  'application/jsonlines': 'jsonlines',
  'application/jsons': 'jsonlines',
  'application/x-jsonlines': 'jsonlines',
  'text/csv': 'csv',
  'application/x-image': 'image',
  'image/jpeg': 'image',
  'image/png': 'image',
  'image/webp': 'image',
};

/** The media type of a Content-Type value, lower-cased, without parameters. */
export function mediaType(header: string | undefined): string {
  return (header ?? '').split(';', 1)[0]!.trim().toLowerCase();
}

/** RequestKind for a Content-Type; an absent header means JSON. Undefined when unsupported. */
export function requestKindFor(contentType: string | undefined): RequestKind | undefined {
  const type = mediaType(contentType);
  if (type === '') return 'json';
  return Object.hasOwn(REQUEST_KINDS, type) ? REQUEST_KINDS[type] : undefined;
}

/**
 * Chooses the response format from an Accept header: the acceptable entry with the
 * highest q (ties: first listed) among application/json, application/jsonlines
 * (also application/jsons) and the wildcards `*∕*`, `application/*` (-> JSON).
 * Absent or empty Accept -> JSON. Undefined when nothing listed is acceptable.
 */
export function negotiateResponse(accept: string | undefined): ResponseKind | undefined {
  if (accept === undefined || accept.trim() === '') return 'json';
  let best: { kind: ResponseKind; q: number } | undefined;
  for (const entry of accept.split(',')) {
    const [typePart, ...params] = entry.split(';');
    const type = typePart!.trim().toLowerCase();
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p);
      if (m) q = Number(m[1]);
    }
    if (!(q > 0)) continue;
    let kind: ResponseKind | undefined;
    if (type === 'application/json' || type === '*/*' || type === 'application/*') kind = 'json';
    else if (type === 'application/jsonlines' || type === 'application/jsons') kind = 'jsonlines';
    if (kind !== undefined && (best === undefined || q > best.q)) best = { kind, q };
  }
  return best?.kind;
}

export const RESPONSE_CONTENT_TYPE: Readonly<Record<ResponseKind, string>> = {
  json: 'application/json',
  jsonlines: 'application/jsonlines',
};

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Non-empty lines of a text body (CR LF or LF). */
function lines(text: string): string[] {
  return text.split(/\r?\n/).filter((l) => l.trim() !== '');
}

/** Parses every line as one JSON value; INVALID_ARGUMENT naming the first bad line. */
function parseJsonLines(text: string): unknown[] {
  const values: unknown[] = [];
  let n = 0;
  for (const line of text.split(/\r?\n/)) {
    n++;
    if (line.trim() === '') continue;
    try {
      values.push(parseTfsJsonText(line));
    } catch (error) {
      throw invalidArgument(
        `JSON Lines parse error on line ${n}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  if (values.length === 0) throw invalidArgument('Empty JSON Lines body');
  return values;
}

/**
 * A JSON body as a TF Serving predict body, as the SageMaker TFS container builds it: an
 * object with an `instances`, `inputs` or `examples` key passes through unchanged; a list
 * of lists is the `instances`; any other value, a flat list included (`[1.0, 2.0, 5.0]`),
 * becomes the single instance. Text that is not one JSON value but holds one per line is
 * read as JSON Lines.
 */
export function jsonToPredictBody(text: string): unknown {
  let value: unknown;
  try {
    value = parseTfsJsonText(text);
  } catch (error) {
    if (lines(text).length > 1) return jsonLinesToPredictBody(text);
    throw error;
  }
  if (isPlainObject(value) && ['instances', 'inputs', 'examples'].some((k) => Object.hasOwn(value, k))) {
    return value;
  }
  return { instances: Array.isArray(value) && Array.isArray(value[0]) ? value : [value] };
}

/** JSON Lines: each line is one instance. */
export function jsonLinesToPredictBody(text: string): unknown {
  return { instances: parseJsonLines(text) };
}

/** One CSV field: a number when it reads as one, else the (unquoted) string. */
function csvValue(field: string): number | string {
  const t = field.trim();
  if (t.length >= 2 && t.startsWith('"') && t.endsWith('"')) return t.slice(1, -1).replaceAll('""', '"');
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t)) return Number(t);
  if (/^[+-]?(nan|inf|infinity)$/i.test(t))
    return Number(t.replace(/inf(inity)?/i, 'Infinity').replace(/nan/i, 'NaN'));
  return t;
}

/** Splits one CSV record (RFC 4180 quoting, no embedded newlines). */
function csvFields(line: string): string[] {
  const out: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        field += '""';
        i++;
      } else if (c === '"') {
        quoted = false;
        field += c;
      } else field += c;
    } else if (c === ',') {
      out.push(field);
      field = '';
    } else {
      if (c === '"') quoted = true;
      field += c;
    }
  }
  if (quoted) throw invalidArgument(`CSV: unterminated quote in "${line.slice(0, 80)}"`);
  out.push(field);
  return out;
}

/**
 * CSV: each non-empty line is one instance. A line with one field gives a scalar
 * instance, several fields a list; numeric fields become numbers, others strings
 * (double quotes removed).
 */
export function csvToPredictBody(text: string): unknown {
  const rows = lines(text).map((line) => {
    const fields = csvFields(line).map(csvValue);
    return fields.length === 1 ? fields[0] : fields;
  });
  if (rows.length === 0) throw invalidArgument('Empty CSV body');
  return { instances: rows };
}
