/**
 * The OpenAPI contract as a test hook: every HTTP response a server in this test process
 * sends (whatever client received it: fetch, node:http, our clients) is checked against
 * the OpenAPI document: a documented path, method and status, a declared content type,
 * and a JSON body that validates against its schema. Responses to paths the document does
 * not have (tests probe hostile paths) must be the generic error shape with a 4xx status.
 * Violations are collected; `assertContract()` (called by the harness on close, and after
 * each test file) fails the test with them.
 *
 * Hooked through node:diagnostics_channel (`http.server.request.start`), so it sees the
 * bytes the server wrote; it stores at most 4 MiB of a body and skips schema checks above that.
 */
import { gunzipSync, inflateSync } from 'node:zlib';
import assert from 'node:assert/strict';
import { subscribe } from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after } from 'node:test';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { openApiDocument } from '@visionserve/server';
import { DEFAULTS } from '@visionserve/server';

const MAX_BODY = 4 * 1024 * 1024;
const DOC_ID = 'https://visionserve.invalid/openapi.json';

type Json = Record<string, unknown>;

interface Operation {
  readonly template: string;
  readonly pattern: RegExp;
  readonly params: number;
  readonly methods: Readonly<Record<string, Json>>;
}

const doc = openApiDocument({
  consolePath: DEFAULTS.consolePath,
  version: 'test',
  metricsPath: '/monitoring/prometheus/metrics',
});
const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
ajv.addSchema({ ...doc, $id: DOC_ID });
const validators = new Map<string, ValidateFunction>();

const pointer = (parts: readonly string[]): string =>
  parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

function validatorFor(parts: readonly string[]): ValidateFunction {
  const key = pointer(parts);
  let v = validators.get(key);
  if (v === undefined) {
    v = ajv.compile({ $ref: `${DOC_ID}#/${key}` });
    validators.set(key, v);
  }
  return v;
}

const operations: Operation[] = Object.entries(doc['paths'] as Record<string, Json>)
  .map(([template, item]) => {
    const source = template
      .split(/(\{[^}]+\})/)
      .map((part) => (part.startsWith('{') ? '([^/:]+)' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('');
    const methods: Record<string, Json> = {};
    for (const m of ['get', 'post', 'put', 'delete', 'patch', 'options', 'head']) {
      if (item[m] !== undefined) methods[m] = item[m] as Json;
    }
    return {
      template,
      pattern: new RegExp(`^${source}$`),
      params: (template.match(/\{/g) ?? []).length,
      methods,
    };
  })
  .sort((a, b) => a.params - b.params);

const violations: string[] = [];
/** Local ports of the servers under test (the harness registers its listeners). */
const ports = new Set<number>();

/** Checks the responses of listeners on these ports (other servers in the process, e.g. fake collectors, are not ours). */
export function watchPorts(...list: readonly (number | undefined)[]): void {
  for (const p of list) if (p !== undefined) ports.add(p);
}
let checked = 0;

/** The documented OPTIONS operation of a path, if any. */
function op0(path: string): Json | undefined {
  return operations.find((o) => o.pattern.test(path))?.methods['options'];
}

function mediaMatches(declared: string, actual: string): boolean {
  if (declared === actual || declared === '*/*') return true;
  if (declared.endsWith('/*')) return actual.startsWith(declared.slice(0, -1));
  return false;
}

/** Checks one response; returns a problem or undefined. */
export function checkResponse(
  method: string,
  path: string,
  status: number,
  contentType: string | undefined,
  body: Buffer | undefined,
): string | undefined {
  checked++;
  const what = `${method} ${path} -> ${status}`;
  const type = contentType?.split(';', 1)[0]!.trim().toLowerCase();
  if (method === 'OPTIONS' && op0(path) === undefined) {
    // CORS preflights (--rest_api_enable_cors_support) are answered by the edge on every path.
    if ((status === 200 || status === 204) && (body === undefined || body.byteLength === 0)) return undefined;
  }
  const op = operations.find((o) => o.pattern.test(path));
  const verb = method === 'HEAD' ? 'get' : method.toLowerCase();
  const operation = op?.methods[verb];
  if (op === undefined || operation === undefined) {
    // Not a documented operation: it must be the generic error answer.
    if (status < 400 || status >= 500) return `${what}: undocumented operation answered ${status}`;
    if (body === undefined || body.byteLength === 0 || method === 'HEAD') return undefined;
    if (type !== 'application/json') return `${what}: undocumented operation answered ${String(type)}`;
    return validateJson(what, ['components', 'schemas', 'Error'], body);
  }
  const responses = operation['responses'] as Record<string, Json>;
  const statusKey = [String(status), `${String(status)[0]}XX`, 'default'].find(
    (k) => responses[k] !== undefined,
  );
  if (statusKey === undefined)
    return `${what}: status not documented for ${verb.toUpperCase()} ${op.template}`;
  const response = responses[statusKey]!;
  const content = response['content'] as Record<string, Json> | undefined;
  if (body === undefined || body.byteLength === 0 || method === 'HEAD') return undefined;
  if (content === undefined) return `${what}: a body, but ${op.template} ${statusKey} documents none`;
  if (type === undefined) return `${what}: a body without Content-Type`;
  const media = Object.keys(content).find((m) => mediaMatches(m, type));
  if (media === undefined) {
    return `${what}: Content-Type ${type} not among ${Object.keys(content).join(', ')}`;
  }
  if (media !== 'application/json' || body.byteLength > MAX_BODY) return undefined;
  return validateJson(
    what,
    ['paths', op.template, verb, 'responses', statusKey, 'content', media, 'schema'],
    body,
  );
}

function validateJson(what: string, schemaPath: readonly string[], body: Buffer): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return `${what}: body is not JSON`;
  }
  const validate = validatorFor(schemaPath);
  if (validate(value)) return undefined;
  return `${what}: ${ajv.errorsText(validate.errors)} (body ${body.toString('utf8').slice(0, 200)})`;
}

let installed = false;

/** Starts checking every HTTP response of servers in this process (idempotent). */
export function installContractCheck(): void {
  if (installed) return;
  installed = true;
  subscribe('http.server.request.start', (message) => {
    const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
    if (!ports.has(request.socket.localPort ?? -1)) return;
    const chunks: Buffer[] = [];
    let size = 0;
    const keep = (chunk: unknown, encoding?: unknown): void => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
      const buffer =
        typeof chunk === 'string'
          ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
          : Buffer.from(chunk as Uint8Array);
      size += buffer.byteLength;
      if (size <= MAX_BODY) chunks.push(buffer);
    };
    const write = response.write.bind(response) as (...args: unknown[]) => boolean;
    const end = response.end.bind(response) as (...args: unknown[]) => ServerResponse;
    (response as unknown as { write: (...args: unknown[]) => boolean }).write = (...args) => {
      keep(args[0], args[1]);
      return write(...args);
    };
    (response as unknown as { end: (...args: unknown[]) => ServerResponse }).end = (...args) => {
      keep(args[0], args[1]);
      return end(...args);
    };
    response.once('finish', () => {
      const path = (request.url ?? '/').split('?', 1)[0]!;
      // The header block as sent (headers given to writeHead are not visible to getHeader).
      const raw = (response as unknown as { _header?: string | null })._header ?? '';
      const type = /\r\ncontent-type:\s*([^\r\n]*)/i.exec(raw)?.[1] ?? response.getHeader('content-type');
      const streamed = typeof type === 'string' && type.startsWith('text/event-stream');
      // Bodies compressed for the client (fetch asks for gzip/deflate) are checked decoded.
      const coding = /\r\ncontent-encoding:\s*([^\r\n]*)/i.exec(raw)?.[1]?.trim().toLowerCase();
      const decode = (body: Buffer): Buffer =>
        coding === 'gzip' ? gunzipSync(body) : coding === 'deflate' ? inflateSync(body) : body;
      const problem = checkResponse(
        request.method ?? 'GET',
        path,
        response.statusCode,
        typeof type === 'string' ? type : undefined,
        streamed || size > MAX_BODY ? undefined : decode(Buffer.concat(chunks)),
      );
      if (problem !== undefined) violations.push(problem);
    });
  });
}

/** Fails with every contract violation seen so far (and forgets them). */
export function assertContract(): void {
  const seen = violations.splice(0);
  assert.deepEqual(seen, [], `HTTP responses that break the OpenAPI contract:\n${seen.join('\n')}`);
}

/** How many responses were checked in this process. */
export function contractChecks(): number {
  return checked;
}

installContractCheck();
after(() => {
  assertContract();
});
