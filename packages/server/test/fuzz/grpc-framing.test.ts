/**
 * Fuzz target: the gRPC transport's length-prefixed message reader (frontends/grpc), over
 * real HTTP/2 on loopback with an echo service: compressed flags, length prefixes that lie
 * in both directions, huge declared sizes, several messages in one unary call, bodies split
 * at every byte and sent with pauses, streams reset or left open, odd headers.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { Code, codeFromNumber, overloadedError } from '@visionserve/protocol';
import { type RunningGrpcServer, startGrpcServer } from '../../src/frontends/grpc/index.js';
import { createInflightBudget } from '../../src/frontends/shared/inflight-budget.js';
import { silentLogger } from '../../src/util/logger.js';
import { fuzzAsync, targetOptions } from '@visionserve/testkit/campaign';
import { DEFAULTS } from '../../src/config/server-config.js';
import { grpcServerSettings } from '../../src/compose/config-settings.js';

const ECHO = '/fuzz.Echo/Echo';
/** A message (or inflated head) starting with these bytes is refused on its head. */
const REFUSE_MARK = Buffer.from('FUZZ-REFUSE');
const MAX_MESSAGE = 1 << 20;

interface CallResult {
  /** HTTP status of the response headers; 0 when none arrived. */
  readonly status: number;
  /** grpc-status (headers or trailers); undefined when none arrived. */
  readonly grpcStatus: Code | undefined;
  readonly grpcMessage: string;
  readonly body: Buffer;
  /** True when the stream closed before a status arrived (reset or session gone). */
  readonly reset: boolean;
}

interface CallPlan {
  readonly headers: http2.OutgoingHttpHeaders;
  /** DATA writes, in order, with a pause (ms) before each. */
  readonly writes: readonly { readonly bytes: Uint8Array; readonly pauseMs: number }[];
  /** How the client side ends: half-close, reset, or leave it open (then we reset after a wait). */
  readonly end: 'end' | 'rst' | 'open';
}

function call(session: http2.ClientHttp2Session, plan: CallPlan, waitMs: number): Promise<CallResult> {
  return new Promise((resolve) => {
    const stream = session.request(plan.headers, { endStream: false });
    let status = 0;
    let grpcStatus: Code | undefined;
    let grpcMessage = '';
    const body: Buffer[] = [];
    let done = false;
    const finish = (reset: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
      resolve({ status, grpcStatus, grpcMessage, body: Buffer.concat(body), reset });
    };
    const timer = setTimeout(() => {
      finish(true);
    }, waitMs);
    const readStatus = (headers: http2.IncomingHttpHeaders): void => {
      if (headers['grpc-status'] !== undefined) {
        grpcStatus = codeFromNumber(Number(headers['grpc-status']));
        grpcMessage = decodeURIComponent(String(headers['grpc-message'] ?? ''));
      }
    };
    stream.on('response', (headers) => {
      status = headers[':status'] ?? 0;
      readStatus(headers);
    });
    stream.on('trailers', readStatus);
    stream.on('data', (chunk: Buffer) => body.push(chunk));
    stream.on('error', () => undefined);
    stream.on('close', () => {
      finish(grpcStatus === undefined);
    });
    void (async () => {
      for (const w of plan.writes) {
        if (w.pauseMs > 0) await new Promise((r) => setTimeout(r, w.pauseMs));
        if (stream.destroyed || stream.closed) return;
        stream.write(w.bytes);
      }
      if (stream.destroyed || stream.closed) return;
      if (plan.end === 'end') stream.end();
      else if (plan.end === 'rst') stream.close(http2.constants.NGHTTP2_CANCEL);
    })();
  });
}

function prefixed(flag: number, declared: number, body: Uint8Array): Uint8Array {
  const out = Buffer.alloc(5 + body.byteLength);
  out[0] = flag;
  out.writeUInt32BE(declared >>> 0, 1);
  out.set(body, 5);
  return out;
}

/** Splits bytes at the given cut points (taken modulo the length). */
function split(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => (bytes.length === 0 ? 0 : c % bytes.length)))].sort(
    (a, b) => a - b,
  );
  const out: Uint8Array[] = [];
  let from = 0;
  for (const p of points) {
    if (p > from) out.push(bytes.subarray(from, p));
    from = Math.max(from, p);
  }
  out.push(bytes.subarray(from));
  return out.filter((b) => b.byteLength > 0);
}

/** A unary call's body as sent, and whether it is exactly one well-formed message. */
const bodyArb = fc.oneof(
  // One message, length right or wrong.
  fc
    .record({
      flag: fc.oneof(
        { weight: 6, arbitrary: fc.constant(0) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 255 }) },
      ),
      body: fc.uint8Array({ maxLength: 2048 }),
      lie: fc.oneof(
        { weight: 5, arbitrary: fc.constant(0) },
        { weight: 2, arbitrary: fc.integer({ min: -40, max: 40 }) },
        { weight: 1, arbitrary: fc.constantFrom(MAX_MESSAGE + 1, 2 ** 31 - 1, 2 ** 32 - 1, 1 << 24) },
      ),
    })
    .map(({ flag, body, lie }) => {
      const declared = Math.max(0, lie > 1000 ? lie : body.byteLength + lie);
      return {
        bytes: prefixed(flag, declared, body),
        wellFormed: flag === 0 && declared === body.byteLength,
        message: body,
      };
    }),
  // Several messages (a unary call takes one).
  fc.array(fc.uint8Array({ maxLength: 300 }), { minLength: 2, maxLength: 4 }).map((bodies) => ({
    bytes: new Uint8Array(Buffer.concat(bodies.map((b) => prefixed(0, b.byteLength, b)))),
    wellFormed: false,
    message: undefined,
  })),
  // One compressed message, whole or cut short, that the head admission inflates (a head that
  // starts with REFUSE_MARK is refused there, as an overloaded model's would be).
  fc
    .record({
      body: fc.uint8Array({ maxLength: 4096 }),
      marked: fc.boolean(),
      gzip: fc.boolean(),
      cut: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 64 })),
    })
    .map(({ body, marked, gzip, cut }) => {
      const plain = marked ? Buffer.concat([REFUSE_MARK, body]) : body;
      const packed = (gzip ? gzipSync : deflateSync)(plain);
      const sent = packed.subarray(0, Math.max(0, packed.byteLength - cut));
      return { bytes: prefixed(1, sent.byteLength, sent), wellFormed: false, message: undefined };
    }),
  // A truncated prefix, or nothing at all.
  fc.uint8Array({ maxLength: 4 }).map((bytes) => ({ bytes, wellFormed: false, message: undefined })),
);

const headersArb: fc.Arbitrary<{ headers: http2.OutgoingHttpHeaders; normal: boolean }> = fc
  .record({
    method: fc.oneof(
      { weight: 8, arbitrary: fc.constant('POST') },
      { weight: 1, arbitrary: fc.constantFrom('GET', 'PUT', 'post') },
    ),
    path: fc.oneof(
      { weight: 8, arbitrary: fc.constant(ECHO) },
      { weight: 1, arbitrary: fc.constantFrom('/fuzz.Echo/Nope', '/', '/fuzz.Echo/Echo/', '/%00') },
    ),
    contentType: fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom('application/grpc', 'application/grpc+proto') },
      { weight: 1, arbitrary: fc.constantFrom('application/json', 'text/plain', 'application/grpcx') },
    ),
    encoding: fc.oneof(
      { weight: 8, arbitrary: fc.constant(undefined) },
      { weight: 2, arbitrary: fc.constantFrom('identity', 'gzip', 'deflate', 'snappy') },
    ),
    timeout: fc.oneof(
      { weight: 6, arbitrary: fc.constant(undefined) },
      {
        weight: 1,
        arbitrary: fc.constantFrom('1S', '99999999H', '0n', '10m', 'abc', '123456789S', '1', '-1S'),
      },
    ),
  })
  .map(({ method, path, contentType, encoding, timeout }) => ({
    headers: {
      ':method': method,
      ':path': path,
      'content-type': contentType,
      te: 'trailers',
      ...(encoding === undefined ? {} : { 'grpc-encoding': encoding }),
      ...(timeout === undefined ? {} : { 'grpc-timeout': timeout }),
    },
    normal:
      method === 'POST' &&
      path === ECHO &&
      contentType.startsWith('application/grpc') &&
      contentType !== 'application/grpcx' &&
      (encoding === undefined || encoding === 'identity') &&
      (timeout === undefined || /^\d{1,8}[HMS]$/.test(timeout)),
  }));

/**
 * Statuses a refused call may end with. INTERNAL only for a message cut short by END_STREAM,
 * a nonzero compressed flag without a grpc-encoding and a compressed message that does not
 * decompress (gRPC's conventions).
 */
const REFUSALS: readonly Code[] = [
  Code.INVALID_ARGUMENT,
  Code.UNIMPLEMENTED,
  Code.RESOURCE_EXHAUSTED,
  Code.DEADLINE_EXCEEDED,
  Code.CANCELLED,
  Code.UNAVAILABLE,
];

describe('fuzz: gRPC length-prefixed framing', () => {
  let server: RunningGrpcServer;
  let session: http2.ClientHttp2Session;
  let internalIncomplete = 0;
  let internalFlag = 0;
  let internalDecompress = 0;

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger,
      maxMessageBytes: MAX_MESSAGE,
      budget: createInflightBudget({ maxBytes: 8 * MAX_MESSAGE, maxRequests: 64 }),
      bodyTimeoutMs: 2_000,
      services: [
        {
          name: 'fuzz.Echo',
          methods: {
            Echo: {
              admit: (head) => {
                if (Buffer.from(head.subarray(0, REFUSE_MARK.byteLength)).equals(REFUSE_MARK)) {
                  throw overloadedError('fuzz: refused on its head');
                }
                return undefined;
              },
              handler: (message) => Promise.resolve([message.slice()]),
            },
          },
        },
      ],
    });
  });

  after(async () => {
    session?.close();
    await server.close(1000);
  });

  const connect = (): http2.ClientHttp2Session => {
    if (session === undefined || session.closed || session.destroyed) {
      session = http2.connect(`http://127.0.0.1:${server.port}`);
      session.on('error', () => undefined);
    }
    return session;
  };

  it('regression: two messages in one DATA frame of a unary call are refused, not a crash', async () => {
    const result = await call(
      connect(),
      {
        headers: { ':method': 'POST', ':path': ECHO, 'content-type': 'application/grpc', te: 'trailers' },
        writes: [{ bytes: Uint8Array.of(0, 0, 0, 0, 2, 0x0a, 0x00, 0, 0, 0, 0, 2, 0x0a, 0x00), pauseMs: 0 }],
        end: 'end',
      },
      5_000,
    );
    assert.equal(result.grpcStatus, Code.UNIMPLEMENTED, result.grpcMessage);
    assert.match(result.grpcMessage, /More than one request message/);
    const ok = await call(
      connect(),
      {
        headers: { ':method': 'POST', ':path': ECHO, 'content-type': 'application/grpc', te: 'trailers' },
        writes: [{ bytes: prefixed(0, 3, Uint8Array.of(1, 2, 3)), pauseMs: 0 }],
        end: 'end',
      },
      5_000,
    );
    assert.equal(ok.grpcStatus, Code.OK);
  });

  it(
    'grpc-framing/hostile: any framing of a unary call ends with OK and the echo, or a refusal status',
    targetOptions('grpc-framing/hostile'),
    async (t) => {
      await fuzzAsync(
        t,
        'grpc-framing/hostile',
        fc.asyncProperty(
          headersArb,
          bodyArb,
          fc.array(fc.nat(), { maxLength: 6 }),
          fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 6 }),
          fc.oneof(
            { weight: 8, arbitrary: fc.constant('end' as const) },
            { weight: 1, arbitrary: fc.constantFrom('rst' as const, 'open' as const) },
          ),
          async ({ headers, normal }, body, cuts, pauses, end) => {
            const writes = split(body.bytes, cuts).map((bytes, i) => ({ bytes, pauseMs: pauses[i] ?? 0 }));
            // Calls we reset or abandon get a session of their own: node's http2 *client* can
            // spin (event loop stuck, memory growing) when a stream is cancelled right after the
            // server reset an earlier stream of the same session (the server, in its own
            // process, stays healthy). See docs/fuzzing.md.
            const own = end === 'end' ? undefined : http2.connect(`http://127.0.0.1:${server.port}`);
            own?.on('error', () => undefined);
            const result = await call(
              own ?? connect(),
              { headers, writes, end },
              end === 'open' ? 300 : 3_000,
            );
            own?.destroy();
            if (end !== 'end') return; // we reset or abandoned it: any outcome is fine, the server must live on
            if (result.status !== 200) {
              if (!(result.status === 415 && !normal)) throw new Error(`HTTP status ${result.status}`);
              return;
            }
            if (result.grpcStatus === undefined) throw new Error('no grpc-status');
            if (normal && body.wellFormed) {
              if (result.grpcStatus !== Code.OK)
                throw new Error(
                  `well-formed call answered ${Code[result.grpcStatus]}: ${result.grpcMessage}`,
                );
              const echoed = result.body.subarray(5);
              if (Buffer.compare(echoed, Buffer.from(body.message!)) !== 0) throw new Error('echo differs');
              return;
            }
            if (result.grpcStatus === Code.OK) {
              if (!normal || body.wellFormed) return;
              throw new Error(`malformed call answered OK`);
            }
            if (
              result.grpcStatus === Code.INTERNAL &&
              /^Incomplete request message$/.test(result.grpcMessage)
            ) {
              internalIncomplete++;
              return;
            }
            // A compressed flag (or any flag but 0) without a grpc-encoding: INTERNAL, as grpc-go answers.
            if (
              result.grpcStatus === Code.INTERNAL &&
              /^Compressed message without a supported grpc-encoding/.test(result.grpcMessage) &&
              body.bytes[0] !== 0
            ) {
              internalFlag++;
              return;
            }
            // A compressed message that does not decompress: INTERNAL, as grpc-go and C-core answer.
            if (
              result.grpcStatus === Code.INTERNAL &&
              /^Cannot decompress the (gzip|deflate) message/.test(result.grpcMessage) &&
              body.bytes[0] !== 0
            ) {
              internalDecompress++;
              return;
            }
            if (!REFUSALS.includes(result.grpcStatus)) {
              throw new Error(
                `status ${Code[result.grpcStatus] ?? result.grpcStatus}: ${result.grpcMessage}`,
              );
            }
          },
        ),
        250,
        () =>
          `; ${internalIncomplete} calls cut short answered INTERNAL "Incomplete request message" and ` +
          `${internalFlag} with a nonzero flag and no grpc-encoding and ${internalDecompress} with a ` +
          `message that did not decompress INTERNAL (gRPC's conventions)`,
        false,
      );
      // The server is still there and serves a normal call.
      const ok = await call(
        connect(),
        {
          headers: { ':method': 'POST', ':path': ECHO, 'content-type': 'application/grpc', te: 'trailers' },
          writes: [{ bytes: prefixed(0, 1, Uint8Array.of(7)), pauseMs: 0 }],
          end: 'end',
        },
        5_000,
      );
      assert.equal(ok.grpcStatus, Code.OK);
    },
  );
});
