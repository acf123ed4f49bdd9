/**
 * Fuzz target: raw HTTP/2 frames on a TCP socket to the gRPC listener (an echo service):
 * sequences of SETTINGS, HEADERS (our own minimal HPACK), CONTINUATION, DATA, RST_STREAM,
 * WINDOW_UPDATE, PING, PRIORITY, GOAWAY and unknown frames with hostile values: bad stream
 * ids, padding longer than the payload, oversized frames, invalid settings, rapid resets,
 * CONTINUATION floods, header sets gRPC does not expect, and byte edits of all of it. The
 * listener must never log an internal error and must keep serving calls on new sessions.
 */
import { after, before, describe, it } from 'node:test';
import http2 from 'node:http2';
import { connect } from 'node:net';
import fc from 'fast-check';
import { type RunningGrpcServer, startGrpcServer } from '../../src/frontends/grpc/index.js';
import { createInflightBudget } from '../../src/frontends/shared/inflight-budget.js';
import { createJsonLogger } from '../../src/util/logger.js';
import { mutate, mutationArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, targetOptions } from '@visionserve/testkit/campaign';
import { frame, hpack } from '../h2-wire.js';
import { DEFAULTS } from '../../src/config/server-config.js';
import { grpcServerSettings } from '../../src/compose/config-settings.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const MAX_MESSAGE = 64 * 1024;

const T = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

function grpcMessage(body: Uint8Array, flag = 0, declared = body.byteLength): Buffer {
  const out = Buffer.alloc(5 + body.byteLength);
  out[0] = flag;
  out.writeUInt32BE(declared >>> 0, 1);
  out.set(body, 5);
  return out;
}

const CALL: readonly (readonly [string, string])[] = [
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', '/fuzz.Echo/Echo'],
  [':authority', 'x'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
];

/** Header sets: a good call, and sets gRPC or HTTP/2 do not allow. */
const headerSetArb: fc.Arbitrary<readonly (readonly [string, string])[]> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(CALL) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.nat(),
        fc.constantFrom<readonly [string, string]>(
          [':path', '/fuzz.Echo/Nope'],
          [':path', ''],
          [':path', '*'],
          [':method', 'GET'],
          [':method', 'CONNECT'],
          [':scheme', ''],
          [':status', '200'],
          [':unknown', 'x'],
          ['content-type', 'application/json'],
          ['content-type', 'application/grpc+proto;charset=x'],
          ['Content-Type', 'application/grpc'],
          ['connection', 'keep-alive'],
          ['te', 'gzip'],
          ['grpc-timeout', '1n'],
          ['grpc-timeout', '99999999H'],
          ['grpc-timeout', '-5S'],
          ['grpc-timeout', 'abc'],
          ['grpc-encoding', 'gzip'],
          ['grpc-encoding', 'snappy'],
          ['content-length', '3'],
          ['content-length', '-1'],
          ['x-bin', '\u0000\u00ff'],
          ['x-long', 'a'.repeat(20_000)],
          ['', 'empty name'],
        ),
        fc.boolean(),
      )
      .map(([at, field, replace]) => {
        const i = at % CALL.length;
        return replace ? CALL.map((f, j) => (j === i ? field : f)) : [...CALL, field];
      }),
  },
  { weight: 1, arbitrary: fc.nat().map((drop) => CALL.filter((_, j) => j !== drop % CALL.length)) },
);

const streamIdArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant(1) },
  { weight: 1, arbitrary: fc.constantFrom(0, 2, 3, 5, 0x7fffffff, 0x80000001) },
);

/** One step of a connection, as bytes. */
const opArb: fc.Arbitrary<Buffer> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(streamIdArb, headerSetArb, fc.boolean(), fc.integer({ min: 0, max: 3 }))
      .map(([stream, fields, endStream, variant]) => {
        const block = hpack(fields);
        if (variant === 1) {
          // Split across CONTINUATION frames.
          const half = Math.floor(block.length / 2);
          return Buffer.concat([
            frame(T.HEADERS, endStream ? F.END_STREAM : 0, stream, block.subarray(0, half)),
            frame(T.CONTINUATION, F.END_HEADERS, stream, block.subarray(half)),
          ]);
        }
        if (variant === 2) {
          // Padded, the pad length sometimes longer than the payload.
          const pad = block.length % 2 === 0 ? 3 : 255;
          return frame(
            T.HEADERS,
            F.END_HEADERS | F.PADDED | (endStream ? F.END_STREAM : 0),
            stream,
            Buffer.concat([Buffer.from([pad]), block, Buffer.alloc(Math.min(pad, 3))]),
          );
        }
        if (variant === 3) {
          // With a priority block that depends on the stream itself.
          const priority = Buffer.alloc(5);
          priority.writeUInt32BE(stream >>> 0, 0);
          priority[4] = 15;
          return frame(
            T.HEADERS,
            F.END_HEADERS | F.PRIORITY | (endStream ? F.END_STREAM : 0),
            stream,
            Buffer.concat([priority, block]),
          );
        }
        return frame(T.HEADERS, F.END_HEADERS | (endStream ? F.END_STREAM : 0), stream, block);
      }),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        streamIdArb,
        fc.uint8Array({ maxLength: 300 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: -3, max: 3 }),
      )
      .map(([stream, body, endStream, variant, lie]) => {
        const message =
          variant === 1
            ? grpcMessage(body, 1) // compressed flag without an encoding
            : variant === 2
              ? grpcMessage(body, 0, 2 ** 31 - 1)
              : grpcMessage(body, 0, Math.max(0, body.byteLength + (variant === 3 ? lie : 0)));
        if (variant === 4) {
          return frame(
            T.DATA,
            F.PADDED | (endStream ? F.END_STREAM : 0),
            stream,
            Buffer.concat([Buffer.from([250]), message]),
          );
        }
        return frame(T.DATA, endStream ? F.END_STREAM : 0, stream, message);
      }),
  },
  {
    weight: 1,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.integer({ min: 0, max: 10 }),
          fc.constantFrom(0, 1, 2, 100, 16_383, 16_384, 2 ** 24, 2 ** 31, 2 ** 32 - 1),
        ),
        { maxLength: 4 },
      )
      .map((entries) => {
        const payload = Buffer.alloc(entries.length * 6);
        entries.forEach(([id, value], i) => {
          payload.writeUInt16BE(id, i * 6);
          payload.writeUInt32BE(value >>> 0, i * 6 + 2);
        });
        return frame(T.SETTINGS, 0, 0, payload);
      }),
  },
  { weight: 1, arbitrary: fc.constant(frame(T.SETTINGS, F.ACK, 0, Buffer.alloc(0))) },
  { weight: 1, arbitrary: fc.constant(frame(T.SETTINGS, F.ACK, 0, Buffer.alloc(6))) },
  {
    weight: 1,
    arbitrary: fc.tuple(streamIdArb, fc.integer({ min: 0, max: 13 })).map(([stream, code]) => {
      const payload = Buffer.alloc(4);
      payload.writeUInt32BE(code, 0);
      return frame(T.RST_STREAM, 0, stream, payload);
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(0, 1, 3), fc.constantFrom(0, 1, 65_535, 2 ** 31 - 1, 2 ** 32 - 1))
      .map(([stream, increment]) => {
        const payload = Buffer.alloc(4);
        payload.writeUInt32BE(increment >>> 0, 0);
        return frame(T.WINDOW_UPDATE, 0, stream, payload);
      }),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.boolean(), fc.constantFrom(0, 1), fc.integer({ min: 1, max: 200 }))
      .map(([ack, stream, count]) =>
        Buffer.concat(
          Array.from({ length: count }, () => frame(T.PING, ack ? F.ACK : 0, stream, Buffer.alloc(8))),
        ),
      ),
  },
  { weight: 1, arbitrary: fc.constant(frame(T.PRIORITY, 0, 1, Buffer.from([0, 0, 0, 1, 7]))) },
  { weight: 1, arbitrary: fc.constant(frame(T.PUSH_PROMISE, F.END_HEADERS, 1, Buffer.from([0, 0, 0, 2]))) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 0, max: 13 }).map((code) => {
      const payload = Buffer.alloc(8);
      payload.writeUInt32BE(1, 0);
      payload.writeUInt32BE(code, 4);
      return frame(T.GOAWAY, 0, 0, payload);
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 10, max: 255 }), fc.uint8Array({ maxLength: 32 }), fc.constantFrom(0, 1))
      .map(([type, payload, stream]) => frame(type, 0xff, stream, payload)),
  },
  // Rapid reset: open and cancel many streams.
  {
    weight: 1,
    arbitrary: fc.integer({ min: 10, max: 1000 }).map((n) => {
      const rst = Buffer.alloc(4);
      rst.writeUInt32BE(8, 0);
      const block = hpack(CALL);
      const frames: Buffer[] = [];
      for (let i = 0; i < n; i++) {
        const stream = 101 + 2 * i;
        frames.push(frame(T.HEADERS, F.END_HEADERS, stream, block), frame(T.RST_STREAM, 0, stream, rst));
      }
      return Buffer.concat(frames);
    }),
  },
  // CONTINUATION flood: a header block that never ends.
  {
    weight: 1,
    arbitrary: fc.integer({ min: 10, max: 2000 }).map((n) => {
      const filler = hpack([['x-fill', 'y'.repeat(100)]]);
      const frames = [frame(T.HEADERS, 0, 1, hpack(CALL))];
      for (let i = 0; i < n; i++) frames.push(frame(T.CONTINUATION, 0, 1, filler));
      return Buffer.concat(frames);
    }),
  },
  // A frame header that declares more than the default maximum frame size, or than it holds.
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(16_385, 2 ** 24 - 1, 100)
      .map((declared) => frame(T.DATA, 0, 1, Buffer.alloc(Math.min(declared, 20_000)), declared)),
  },
  // HPACK that is not: indexes past the tables, a huge dynamic table size update, a cut literal.
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]),
        Buffer.from([0x3f, 0xe1, 0xff, 0xff, 0xff, 0x0f]),
        Buffer.from([0x00, 0x7f, 0xff, 0xff, 0xff, 0x7f]),
        Buffer.from([0xbe]),
        Buffer.from([0x00, 0x85, 0xff, 0xff]),
      )
      .map((block) => frame(T.HEADERS, F.END_HEADERS, 1, block)),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)) },
);

const connectionArb: fc.Arbitrary<Buffer> = fc
  .tuple(
    fc.oneof(
      { weight: 9, arbitrary: fc.constant(PREFACE) },
      { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
    ),
    fc.boolean(),
    fc.array(opArb, { minLength: 1, maxLength: 6 }),
    fc.array(mutationArb, { maxLength: 2 }),
    fc.boolean(),
  )
  .map(([preface, settings, ops, mutations, mutateBytes]) => {
    const bytes = Buffer.concat([
      preface,
      settings ? frame(T.SETTINGS, 0, 0, Buffer.alloc(0)) : Buffer.alloc(0),
      ...ops,
    ]);
    return mutateBytes ? Buffer.from(mutate(bytes, mutations)) : bytes;
  });

/** Sends `bytes` in `splits` writes, then reads until the server closes or stays quiet for `quietMs`. */
function session(
  port: number,
  bytes: Buffer,
  splits: number,
  quietMs: number,
): Promise<{ frames: number[]; goaway: number[] }> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let quiet: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(quiet);
      clearTimeout(cap);
      socket.destroy();
      // The server's frames: 9-byte headers from the start (the server sends no preface).
      const all = Buffer.concat(chunks);
      const frames: number[] = [];
      const goaway: number[] = [];
      for (let at = 0; at + 9 <= all.length;) {
        const length = all.readUIntBE(at, 3);
        const type = all[at + 3]!;
        frames.push(type);
        if (type === T.GOAWAY && at + 17 <= all.length) goaway.push(all.readUInt32BE(at + 13));
        at += 9 + length;
      }
      resolve({ frames, goaway });
    };
    const rearm = (): void => {
      clearTimeout(quiet);
      quiet = setTimeout(finish, quietMs);
    };
    const cap = setTimeout(finish, 5_000);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      rearm();
    });
    socket.on('close', finish);
    socket.on('error', finish);
    socket.on('connect', () => {
      const size = Math.ceil(bytes.length / splits);
      for (let i = 0; i < splits; i++) socket.write(bytes.subarray(i * size, (i + 1) * size));
      rearm();
    });
  });
}

describe('fuzz: HTTP/2 frames on the gRPC listener', () => {
  let server: RunningGrpcServer;
  const logs: string[] = [];

  before(async () => {
    const logger = createJsonLogger({ level: 'warn', write: (line) => logs.push(line) });
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      logger,
      maxMessageBytes: MAX_MESSAGE,
      budget: createInflightBudget({ maxBytes: 8 * MAX_MESSAGE, maxRequests: 64 }),
      bodyTimeoutMs: 2_000,
      services: [
        {
          name: 'fuzz.Echo',
          methods: { Echo: { handler: (message) => Promise.resolve([message.slice()]) } },
        },
      ],
    });
  });

  after(async () => {
    await server.close(1000);
  });

  /** A well-formed call on a new session (node's own client): the echo and status 0. */
  function healthy(): Promise<boolean> {
    return new Promise((resolve) => {
      const client = http2.connect(`http://127.0.0.1:${server.port}`);
      client.on('error', () => undefined);
      const timer = setTimeout(() => {
        client.destroy();
        resolve(false);
      }, 5_000);
      const stream = client.request({
        ':method': 'POST',
        ':path': '/fuzz.Echo/Echo',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      const body: Buffer[] = [];
      let status: string | undefined;
      stream.on('data', (c: Buffer) => body.push(c));
      stream.on('trailers', (h: http2.IncomingHttpHeaders) => {
        status = String(h['grpc-status'] ?? '');
      });
      stream.on('error', () => undefined);
      stream.on('close', () => {
        clearTimeout(timer);
        client.close();
        resolve(status === '0' && Buffer.concat(body).equals(grpcMessage(Buffer.from('ok'))));
      });
      stream.end(grpcMessage(Buffer.from('ok')));
    });
  }

  it(
    'http2-frames/hostile: hostile frame sequences never cause an internal error, and the listener keeps serving',
    targetOptions('http2-frames/hostile', 300_000),
    async (t) => {
      const goaways = new Map<number, number>();
      await fuzzAsync(
        t,
        'http2-frames/hostile',
        fc.asyncProperty(connectionArb, fc.integer({ min: 1, max: 3 }), async (bytes, splits) => {
          const { goaway } = await session(server.port, bytes, splits, 100);
          for (const code of goaway) goaways.set(code, (goaways.get(code) ?? 0) + 1);
          if (!(await healthy())) throw new Error('the listener stopped serving calls on a new session');
          const errors = logs.filter((l) => /"level":"error"/.test(l));
          if (errors.length > 0) throw new Error(`error logged: ${errors[0]!.slice(0, 500)}`);
        }),
        100,
        () =>
          `; GOAWAY codes ${[...goaways.entries()]
            .sort((a, b) => a[0] - b[0])
            .map(([c, n]) => `${c}x${n}`)
            .join(' ')}`,
        false,
      );
    },
  );
});
