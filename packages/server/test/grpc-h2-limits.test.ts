/**
 * Limits of the gRPC server's own HTTP/2 transport against peers that are slow, stuck or
 * hostile, over raw sockets: status header blocks larger than the peer's frame size go out
 * as HEADERS + CONTINUATION, grpc-message stays small whatever the path, SETTINGS frames full
 * of INITIAL_WINDOW_SIZE entries cost one pass over the streams, and responses the peer never
 * lets through are given up (stream reset, resources released) instead of held for ever.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { type Socket, connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { deflateSync, gzipSync } from 'node:zlib';
import { Code, ServingError } from '@visionserve/protocol';
import { createInflightBudget } from '../src/frontends/shared/inflight-budget.js';
import { type RunningGrpcServer, startGrpcServer } from '../src/frontends/grpc/index.js';
import { startH2Listener } from '../src/frontends/grpc/h2/h2-server.js';
import { createHpackDecoder } from '@visionserve/h2';
import type { GrpcListener } from '../src/frontends/grpc/grpc-listener.js';
import { createJsonLogger } from '../src/util/logger.js';
import { frame, hpack, settings, u32 } from './h2-wire.js';
import type { RequestEnd } from '../src/frontends/shared/request-observer.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { connectionGuardSettings, grpcServerSettings } from '../src/compose/config-settings.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const T = {
  DATA: 0,
  HEADERS: 1,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
};
const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 };
const INITIAL_WINDOW_SIZE = 4;
const E = { NO_ERROR: 0, CANCEL: 8 };

const request = (path: string, contentType = 'application/grpc', more: [string, string][] = []): Buffer =>
  hpack([
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', path],
    [':authority', 'x'],
    ['content-type', contentType],
    ['te', 'trailers'],
    ...more,
  ]);

/** A length-prefixed gRPC message of `body` (already compressed when `compressed`). */
function grpcMessage(body: Uint8Array, compressed = false): Buffer {
  const out = Buffer.alloc(5 + body.byteLength);
  out[0] = compressed ? 1 : 0;
  out.writeUInt32BE(body.byteLength, 1);
  out.set(body, 5);
  return out;
}

interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly stream: number;
  readonly payload: Buffer;
}

/** A raw HTTP/2 client connection that keeps every frame the server sends. */
class RawClient {
  readonly frames: Frame[] = [];
  closed = false;
  private buffered = Buffer.alloc(0);
  readonly socket: Socket;

  constructor(port: number) {
    this.socket = connect({ host: '127.0.0.1', port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      while (this.buffered.length >= 9) {
        const length = this.buffered.readUIntBE(0, 3);
        if (this.buffered.length < 9 + length) break;
        this.frames.push({
          type: this.buffered[3]!,
          flags: this.buffered[4]!,
          stream: this.buffered.readUInt32BE(5) & 0x7fffffff,
          payload: Buffer.from(this.buffered.subarray(9, 9 + length)),
        });
        this.buffered = this.buffered.subarray(9 + length);
      }
    });
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => {
      this.closed = true;
    });
  }

  write(...chunks: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(chunks));
  }

  on(stream: number): Frame[] {
    return this.frames.filter((f) => f.stream === stream);
  }

  /** The header block of the stream's last HEADERS (+ CONTINUATION) frames, decoded. */
  headerFields(stream: number): Map<string, string> {
    const frames = this.on(stream).filter((f) => f.type === T.HEADERS || f.type === T.CONTINUATION);
    const block = Buffer.concat(frames.map((f) => f.payload));
    const fields = new Map<string, string>();
    createHpackDecoder().decode(block, (name, value) => fields.set(name, value));
    return fields;
  }

  close(): void {
    this.socket.destroy();
  }
}

async function waitFor(test: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const quiet = createJsonLogger({ level: 'error', write: () => undefined });

describe('gRPC over our own HTTP/2: status header blocks', () => {
  let listener: GrpcListener;
  const long = 'x'.repeat(30_000);

  before(async () => {
    listener = await startH2Listener({
      ...connectionGuardSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      logger: quiet,
      windowBytes: 1 << 20,
      maxFrameBytes: 1 << 20,
      maxConcurrentStreams: 100,
      maxHeaderListBytes: 64 * 1024,
      maxConnections: 100,
      tls: undefined,
      headerTimeoutMs: 300,
      onStream: (stream) => {
        stream.respondStatus(Code.UNIMPLEMENTED, long);
      },
    });
  });

  after(async () => {
    await listener.close(1000);
  });

  it('a block larger than the peer SETTINGS_MAX_FRAME_SIZE goes out as HEADERS + CONTINUATION frames', async () => {
    const c = new RawClient(listener.port);
    try {
      c.write(PREFACE, settings([]), frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, request('/a.B/C')));
      await waitFor(
        () => c.on(1).some((f) => (f.flags & F.END_HEADERS) !== 0),
        5000,
        'the end of the header block',
      );
      const frames = c.on(1);
      assert.ok(frames.length >= 2);
      assert.equal(frames[0]!.type, T.HEADERS);
      assert.equal(frames[0]!.flags, F.END_STREAM);
      for (const f of frames.slice(1)) assert.equal(f.type, T.CONTINUATION);
      assert.equal(frames.at(-1)!.flags, F.END_HEADERS);
      for (const f of frames) assert.ok(f.payload.byteLength <= 16384);
      const fields = c.headerFields(1);
      assert.equal(fields.get('grpc-status'), String(Code.UNIMPLEMENTED));
      assert.equal(fields.get('grpc-message'), long);
    } finally {
      c.close();
    }
  });

  it('node:http2 clients read such a block', async () => {
    const client = http2.connect(`http://127.0.0.1:${listener.port}`);
    client.on('error', () => undefined);
    try {
      const headers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const stream = client.request({
          ':method': 'POST',
          ':path': '/a.B/C',
          'content-type': 'application/grpc',
        });
        stream.on('response', resolve);
        stream.on('error', reject);
        stream.on('close', () => {
          reject(new Error('stream closed without response headers'));
        });
        stream.end();
      });
      assert.equal(headers['grpc-status'], String(Code.UNIMPLEMENTED));
      assert.equal(headers['grpc-message'], long);
    } finally {
      client.close();
    }
  });
  it('a connection without preface and SETTINGS, or with a header block left unfinished, is closed after headerTimeoutMs', async () => {
    const silent = new RawClient(listener.port);
    const half = new RawClient(listener.port);
    const unfinished = new RawClient(listener.port);
    const idle = new RawClient(listener.port);
    try {
      half.write(PREFACE.subarray(0, 10));
      unfinished.write(PREFACE, settings([]), frame(T.HEADERS, 0, 1, request('/a.B/C')));
      idle.write(PREFACE, settings([]));
      const t0 = Date.now();
      await waitFor(
        () => silent.closed && half.closed && unfinished.closed,
        5000,
        'the connections to close',
      );
      assert.ok(Date.now() - t0 >= 150, `${Date.now() - t0} ms`);
      const goaway = unfinished.frames.find((f) => f.type === T.GOAWAY);
      assert.equal(goaway?.payload.readUInt32BE(4), 1);
      // A connection that finished its handshake and has no header block open stays.
      assert.equal(idle.closed, false);
    } finally {
      for (const c of [silent, half, unfinished, idle]) c.close();
    }
  });
});

describe('gRPC over our own HTTP/2: grpc-message length', () => {
  let server: RunningGrpcServer;

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      transport: 'lean',
      logger: quiet,
      services: [{ name: 't.Svc', methods: { Echo: { handler: (m) => Promise.resolve([m.slice()]) } } }],
    });
  });

  after(async () => {
    await server.close(1000);
  });

  it('a 30 KB unknown path: UNIMPLEMENTED with a cut message, in frames of at most 16 KiB', async () => {
    const client = http2.connect(`http://127.0.0.1:${server.port}`);
    client.on('error', () => undefined);
    try {
      const headers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const stream = client.request({
          ':method': 'POST',
          ':path': `/t.Svc/${'y'.repeat(30_000)}`,
          'content-type': 'application/grpc',
        });
        stream.on('response', resolve);
        stream.on('error', reject);
        stream.on('close', () => {
          reject(new Error('stream closed without response headers'));
        });
        stream.end(grpcMessage(Buffer.alloc(0)));
      });
      assert.equal(headers['grpc-status'], String(Code.UNIMPLEMENTED));
      const message = String(headers['grpc-message']);
      assert.match(message, /^Method not found: \/t\.Svc\/y+/);
      assert.ok(message.length <= 4096, `${message.length} characters`);
    } finally {
      client.close();
    }
  });

  it('a path of non-ASCII bytes: the percent-encoded message is cut to 4096 characters between escapes', async () => {
    const c = new RawClient(server.port);
    try {
      c.write(
        PREFACE,
        settings([]),
        frame(T.HEADERS, F.END_HEADERS, 1, request(`/t.Svc/${'\u00e9'.repeat(20_000)}`)),
        frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(0))),
      );
      await waitFor(() => c.on(1).some((f) => (f.flags & F.END_HEADERS) !== 0), 5000, 'the status');
      for (const f of c.on(1)) assert.ok(f.payload.byteLength <= 16384);
      const fields = c.headerFields(1);
      assert.equal(fields.get('grpc-status'), String(Code.UNIMPLEMENTED));
      const message = fields.get('grpc-message')!;
      assert.ok(message.length <= 4096, `${message.length} characters`);
      assert.ok(message.length > 4000, `${message.length} characters`);
      // Whole escapes of whole characters: it decodes.
      assert.match(decodeURIComponent(message), /^Method not found: \/t\.Svc\/\u00e9+$/);
    } finally {
      c.close();
    }
  });
  it('a stream answered early reads and drops the rest of the message and its trailers; no reset, the connection goes on', async () => {
    const c = new RawClient(server.port);
    try {
      c.write(PREFACE, settings([]), frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Nope')));
      await waitFor(
        () => c.on(1).some((f) => f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0),
        5000,
        'the trailers-only answer on stream 1',
      );
      assert.equal(c.headerFields(1).get('grpc-status'), '12');
      c.write(
        frame(T.DATA, 0, 1, grpcMessage(Buffer.alloc(10))),
        frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, hpack([['x-trailer', '1']])),
        frame(T.HEADERS, F.END_HEADERS, 3, request('/t.Svc/Echo')),
        frame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.from('hi'))),
      );
      await waitFor(
        () => c.on(3).some((f) => (f.flags & F.END_STREAM) !== 0),
        5000,
        'the answer on stream 3',
      );
      assert.equal(c.headerFields(3).get('grpc-status'), '0');
      assert.equal(
        c.frames.find((f) => f.type === T.GOAWAY),
        undefined,
      );
      // Resetting at once made node:http2 clients end connections under sustained refusals.
      assert.equal(
        c.on(1).find((f) => f.type === T.RST_STREAM),
        undefined,
      );
    } finally {
      c.close();
    }
  });
  it('malformed requests (a repeated or missing pseudo-header, CR/LF/NUL in a value) reset their stream only', async () => {
    const base: [string, string][] = [
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', '/t.Svc/Echo'],
      [':authority', 'x'],
      ['content-type', 'application/grpc'],
    ];
    const bad: [string, string][][] = [
      [...base.slice(0, 3), [':path', '/t.Svc/Echo'], ...base.slice(3)],
      [...base.slice(0, 2), [':method', 'POST'], ...base.slice(2)],
      base.filter(([n]) => n !== ':scheme'),
      base.filter(([n]) => n !== ':method'),
      [...base, ['x-a', 'a\r\nb']],
      [...base, ['x-a', 'a\nb']],
      [...base, ['x-a', 'a\u0000b']],
    ];
    const c = new RawClient(server.port);
    try {
      c.write(PREFACE, settings([]));
      bad.forEach((fields, i) => {
        c.write(
          frame(T.HEADERS, F.END_HEADERS, 1 + 2 * i, hpack(fields)),
          frame(T.DATA, F.END_STREAM, 1 + 2 * i, grpcMessage(Buffer.from('hi'))),
        );
      });
      const good = 1 + 2 * bad.length;
      c.write(
        frame(T.HEADERS, F.END_HEADERS, good, hpack(base)),
        frame(T.DATA, F.END_STREAM, good, grpcMessage(Buffer.from('hi'))),
      );
      await waitFor(() => c.on(good).some((f) => (f.flags & F.END_STREAM) !== 0), 5000, 'the good call');
      assert.equal(c.headerFields(good).get('grpc-status'), '0');
      bad.forEach((_, i) => {
        const reset = c.on(1 + 2 * i).find((f) => f.type === T.RST_STREAM);
        assert.equal(reset?.payload.readUInt32BE(0), 1, `request ${i}`);
      });
      assert.equal(
        c.frames.find((f) => f.type === T.GOAWAY),
        undefined,
      );
    } finally {
      c.close();
    }
  });
});

describe('gRPC over our own HTTP/2: SETTINGS_INITIAL_WINDOW_SIZE', () => {
  let server: RunningGrpcServer;

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      transport: 'lean',
      logger: quiet,
      services: [{ name: 't.Svc', methods: { Echo: { handler: (m) => Promise.resolve([m.slice()]) } } }],
    });
  });

  after(async () => {
    await server.close(1000);
  });

  it('frames of 2,730 entries with 1,000 open streams are cheap, and the last value of a frame applies', async () => {
    const STREAMS = 1000;
    const FRAMES = 300;
    const c = new RawClient(server.port);
    try {
      c.write(PREFACE, settings([]));
      const heads: Buffer[] = [];
      for (let i = 0; i < STREAMS; i++)
        heads.push(frame(T.HEADERS, F.END_HEADERS, 1 + 2 * i, request('/t.Svc/Echo')));
      c.write(...heads);
      // A PING round trip: the streams are open.
      c.write(frame(T.PING, 0, 0, Buffer.alloc(8)));
      await waitFor(() => c.frames.some((f) => f.type === T.PING), 5000, 'PING ack');
      const entries: [number, number][] = [];
      for (let i = 0; i < 2729; i++) entries.push([INITIAL_WINDOW_SIZE, 65_535 + (i % 1000)]);
      entries.push([INITIAL_WINDOW_SIZE, 10]);
      const flood = settings(entries);
      const acks = (): number => c.frames.filter((f) => f.type === T.SETTINGS && f.flags === F.ACK).length;
      const before = acks();
      const t0 = Date.now();
      for (let i = 0; i < FRAMES; i++) c.write(flood);
      await waitFor(() => acks() === before + FRAMES, 30_000, 'the SETTINGS acks');
      const ms = Date.now() - t0;
      // 819,000 entries x 1,000 streams took 4-5 s when each entry walked the streams.
      assert.ok(ms < 2500, `${ms} ms for ${FRAMES} frames`);
      // Every stream's window is now 10 bytes: a 105-byte answer on stream 1 sends 10 of them.
      c.write(frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(100, 1))));
      await waitFor(() => c.on(1).some((f) => f.type === T.DATA), 5000, 'DATA on stream 1');
      c.write(frame(T.PING, 0, 0, Buffer.alloc(8)));
      await waitFor(() => c.frames.filter((f) => f.type === T.PING).length === 2, 5000, 'PING ack');
      const sent = (): number =>
        c
          .on(1)
          .filter((f) => f.type === T.DATA)
          .reduce((n, f) => n + f.payload.byteLength, 0);
      assert.equal(sent(), 10);
      c.write(frame(T.WINDOW_UPDATE, 0, 1, u32(1000)));
      await waitFor(() => c.on(1).some((f) => (f.flags & F.END_STREAM) !== 0), 5000, 'the trailers');
      assert.equal(sent(), 105);
      assert.equal(
        c.frames.find((f) => f.type === T.GOAWAY),
        undefined,
      );
    } finally {
      c.close();
    }
  });
});

describe('gRPC over our own HTTP/2: responses the client does not let through', () => {
  let server: RunningGrpcServer;
  const ends: RequestEnd[] = [];
  const big = Buffer.alloc(32 * 1024 * 1024, 5);

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      transport: 'lean',
      logger: quiet,
      sendStallTimeoutMs: 300,
      observer: {
        begin: () => (end) => {
          ends.push(end);
        },
      },
      services: [
        {
          name: 't.Svc',
          methods: { Big: { handler: () => Promise.resolve([big]) } },
        },
      ],
    });
  });

  after(async () => {
    await server.close(1000);
  });

  it('a client with SETTINGS_INITIAL_WINDOW_SIZE 0: the stream is reset with CANCEL and the call released', async () => {
    const c = new RawClient(server.port);
    try {
      const before = ends.length;
      c.write(
        PREFACE,
        settings([[INITIAL_WINDOW_SIZE, 0]]),
        frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Big')),
        frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(0))),
      );
      await waitFor(() => c.on(1).some((f) => f.type === T.HEADERS), 5000, 'the response headers');
      const t0 = Date.now();
      await waitFor(() => c.on(1).some((f) => f.type === T.RST_STREAM), 5000, 'RST_STREAM');
      assert.ok(Date.now() - t0 >= 150, `${Date.now() - t0} ms`);
      assert.equal(
        c
          .on(1)
          .find((f) => f.type === T.RST_STREAM)!
          .payload.readUInt32BE(0),
        E.CANCEL,
      );
      await waitFor(() => server.inFlight === 0 && ends.length === before + 1, 5000, 'the call to end');
      assert.equal(
        c.frames.find((f) => f.type === T.GOAWAY),
        undefined,
      );
    } finally {
      c.close();
    }
  });

  it('a client that stops sending a message this side answered early: the stream is reset (NO_ERROR) and the call released', async () => {
    const c = new RawClient(server.port);
    try {
      const before = ends.length;
      // An unknown method is answered at the headers; the client sends part of a message, then nothing.
      c.write(
        PREFACE,
        settings([]),
        frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Nope')),
        frame(T.DATA, 0, 1, grpcMessage(Buffer.alloc(100)).subarray(0, 50)),
      );
      await waitFor(
        () => c.on(1).some((f) => f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0),
        5000,
        'the trailers-only answer',
      );
      const t0 = Date.now();
      await waitFor(() => c.on(1).some((f) => f.type === T.RST_STREAM), 5000, 'RST_STREAM');
      assert.ok(Date.now() - t0 >= 150, `${Date.now() - t0} ms`);
      assert.equal(
        c
          .on(1)
          .find((f) => f.type === T.RST_STREAM)!
          .payload.readUInt32BE(0),
        E.NO_ERROR,
      );
      await waitFor(() => server.inFlight === 0 && ends.length === before + 1, 5000, 'the call to end');
    } finally {
      c.close();
    }
  });

  it('a client that stops reading its socket: the connection is closed and the call released', async () => {
    const c = new RawClient(server.port);
    try {
      c.write(
        PREFACE,
        settings([[INITIAL_WINDOW_SIZE, 0x7fffffff]]),
        frame(T.WINDOW_UPDATE, 0, 0, u32(0x7fffffff - 65_535)),
        frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Big')),
        frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(0))),
      );
      await waitFor(() => c.on(1).some((f) => f.type === T.HEADERS), 5000, 'the response headers');
      c.socket.pause();
      await waitFor(() => server.inFlight === 0, 10_000, 'the call to be released');
      c.socket.resume();
      await waitFor(() => c.closed, 10_000, 'the server to close the connection');
    } finally {
      c.close();
    }
  });
});

describe('gRPC server options', () => {
  for (const [name, value] of [
    ['receiveWindowBytes', 1000],
    ['receiveWindowBytes', 2 ** 31],
    ['maxFrameBytes', 16_383],
    ['maxFrameBytes', 16_777_216],
    ['maxFrameBytes', 20_000.5],
    ['admissionWindowBytes', 1029],
    ['admissionWindowBytes', 2 ** 21],
  ] as const) {
    it(`${name} ${value} is refused at start with a clear error`, async () => {
      await assert.rejects(
        startGrpcServer({
          ...grpcServerSettings(DEFAULTS),
          host: '127.0.0.1',
          port: 0,
          logger: quiet,
          services: [],
          [name]: value,
        }),
        new RegExp(`${name} must be an integer from`),
      );
    });
  }
});

describe('gRPC: the in-flight budget of a message abandoned before it is whole', () => {
  let server: RunningGrpcServer;
  const budget = createInflightBudget({ maxBytes: 64 * 1024 * 1024, maxRequests: 100 });

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      transport: 'lean',
      logger: quiet,
      budget,
      // Long, so that only the early release can free the bytes within the test.
      sendStallTimeoutMs: 60_000,
      services: [
        {
          name: 't.Svc',
          methods: {
            Missing: {
              admit: () => {
                throw new ServingError(Code.NOT_FOUND, 'no such model');
              },
              handler: () => Promise.resolve([]),
            },
            Echo: { handler: () => Promise.resolve([]) },
          },
        },
      ],
    });
  });

  after(async () => {
    await server.close(500);
  });

  it('refused at its head, the rest unsent and the stream left open: its 8 MB reservation is released', async () => {
    const c = new RawClient(server.port);
    try {
      const length = 8 * 1024 * 1024;
      const head = Buffer.alloc(5 + 100_000);
      head.writeUInt32BE(length, 1);
      c.write(
        PREFACE,
        settings([]),
        frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Missing')),
        // Within the window a stream has before it is admitted (64 KiB).
        ...Array.from({ length: 3 }, (_, i) =>
          frame(T.DATA, 0, 1, head.subarray(16_384 * i, 16_384 * (i + 1))),
        ),
      );
      await waitFor(
        () => c.on(1).some((f) => f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0),
        5000,
        'the NOT_FOUND answer',
      );
      await waitFor(() => budget.usedBytes === 0, 2000, 'the reservation to be released');
      assert.equal(server.inFlight, 1, 'the stream itself is still open (the client has not ended it)');
    } finally {
      c.close();
    }
  });

  const length = 900_000;

  /**
   * Opens a call with a 1 s deadline declaring a 900 KB message: its head in a first DATA frame
   * (within the window before admission), then, once the stream's window is opened, a DATA frame
   * with the rest, of which it sends 100 KB and waits for DEADLINE_EXCEEDED: the socket's next
   * read is then meant for the rest of that message's buffer.
   */
  const abandoned = async (): Promise<{ c: RawClient; frameBytes: Buffer }> => {
    const c = new RawClient(server.port);
    const message = Buffer.alloc(5 + length, 7);
    message[0] = 0;
    message.writeUInt32BE(length, 1);
    const headBytes = 5 + 2000;
    const frameBytes = frame(T.DATA, F.END_STREAM, 1, message.subarray(headBytes));
    const headers = hpack([
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', '/t.Svc/Echo'],
      [':authority', 'x'],
      ['content-type', 'application/grpc'],
      ['te', 'trailers'],
      ['grpc-timeout', '1000m'],
    ]);
    c.write(
      PREFACE,
      settings([]),
      frame(T.HEADERS, F.END_HEADERS, 1, headers),
      frame(T.DATA, 0, 1, message.subarray(0, headBytes)),
    );
    await waitFor(() => c.on(1).some((f) => f.type === T.WINDOW_UPDATE), 5000, "the stream's window opened");
    for (let at = 0; at < 100_000; at += 20_000) {
      c.write(frameBytes.subarray(at, at + 20_000));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await waitFor(
      () => c.on(1).some((f) => f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0),
      5000,
      'the DEADLINE_EXCEEDED answer',
    );
    return { c, frameBytes };
  };

  it('read partly into its buffer, then abandoned: released only once the socket reads again', async () => {
    const { c, frameBytes } = await abandoned();
    try {
      assert.equal(c.headerFields(1).get('grpc-status'), String(Code.DEADLINE_EXCEEDED));
      // The buffer is still the socket's: its bytes are still counted.
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(budget.usedBytes, length);
      c.write(frameBytes.subarray(100_000));
      await waitFor(() => budget.usedBytes === 0, 2000, 'the reservation to be released');
    } finally {
      c.close();
    }
  });

  it('read partly into its buffer, then abandoned: released once the connection closes', async () => {
    const { c } = await abandoned();
    assert.equal(budget.usedBytes, length);
    c.close();
    await waitFor(() => budget.usedBytes === 0, 2000, 'the reservation to be released');
  });
});

describe('gRPC over our own HTTP/2: streams past SETTINGS_MAX_CONCURRENT_STREAMS', () => {
  let listener: GrpcListener;
  before(async () => {
    listener = await startH2Listener({
      ...connectionGuardSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      logger: quiet,
      windowBytes: 1 << 20,
      maxFrameBytes: 1 << 20,
      maxConcurrentStreams: 2,
      maxHeaderListBytes: 64 * 1024,
      maxConnections: 100,
      tls: undefined,
      headerTimeoutMs: 5000,
      onStream: () => {
        // Held open: the limit stays reached.
      },
    });
  });
  after(async () => {
    await listener.close(1000);
  });

  /** HEADERS (no END_STREAM) opening `count` streams from `first` on. */
  const opens = (first: number, count: number): Buffer =>
    Buffer.concat(
      Array.from({ length: count }, (_, i) =>
        frame(T.HEADERS, F.END_HEADERS, first + 2 * i, request('/t.Svc/Hold')),
      ),
    );
  const refused = (c: RawClient): number =>
    c.frames.filter((f) => f.type === T.RST_STREAM && f.payload.readUInt32BE(0) === 7).length;
  const goaway = (c: RawClient): number | undefined =>
    c.frames.find((f) => f.type === T.GOAWAY)?.payload.readUInt32BE(4);

  it('before the client acknowledges SETTINGS, 1001 streams past the limit are refused, not a flood; after it, 1001 more are', async () => {
    const c = new RawClient(listener.port);
    try {
      // 2 open, then 1001 more sent before the client could have read the limit (one over the
      // flood limit: 1000 are free, the 1001st counts).
      c.write(PREFACE, settings([]), opens(1, 1003), frame(T.PING, 0, 0, Buffer.alloc(8)));
      await waitFor(() => c.frames.some((f) => f.type === T.PING), 5000, 'the PING answer');
      assert.equal(refused(c), 1001);
      assert.equal(goaway(c), undefined);
      // Acknowledged: now the limit is known, and a client that keeps exceeding it floods.
      c.write(frame(T.SETTINGS, F.ACK, 0), opens(2007, 1001));
      await waitFor(() => goaway(c) !== undefined, 5000, 'GOAWAY');
      assert.equal(goaway(c), 11);
    } finally {
      c.close();
    }
  });

  it('a client that never acknowledges SETTINGS gets the allowance once: 2001 streams past the limit are a flood', async () => {
    const c = new RawClient(listener.port);
    try {
      c.write(PREFACE, settings([]), opens(1, 2003));
      await waitFor(() => goaway(c) !== undefined, 5000, 'GOAWAY');
      assert.equal(goaway(c), 11);
      assert.equal(refused(c), 2000);
    } finally {
      c.close();
    }
  });
});

describe('gRPC over our own HTTP/2: the admission window', () => {
  let server: RunningGrpcServer;
  const WINDOW = 1 << 20;
  const ADMISSION = 65_535;
  const E_FLOW = 3;

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      transport: 'lean',
      logger: quiet,
      receiveWindowBytes: WINDOW,
      services: [
        {
          name: 't.Svc',
          methods: {
            Refuse: {
              admit: () => {
                throw new ServingError(Code.UNAVAILABLE, 'Server is overloaded', { reason: 'overloaded' });
              },
              handler: () => Promise.reject(new Error('never reached')),
            },
            Length: { handler: (request) => Promise.resolve([u32(request.byteLength)]) },
            // Refuses a message that starts with "refuse", as a model's queue would on its spec.
            RefuseMarked: {
              admit: (head) => {
                if (Buffer.from(head.subarray(0, 6)).toString('latin1') === 'refuse') {
                  throw new ServingError(Code.UNAVAILABLE, 'Server is overloaded', { reason: 'overloaded' });
                }
                return undefined;
              },
              handler: (request) => Promise.resolve([u32(request.byteLength)]),
            },
            Chat: {
              handler: () => Promise.resolve([]),
              stream: (call) => ({
                onMessage: (message) => {
                  call.send([u32(message.byteLength)]);
                },
                onEnd: () => {
                  call.end();
                },
              }),
            },
          },
        },
      ],
    });
  });
  after(async () => {
    await server.close(500);
  });

  const streamUpdates = (c: RawClient, stream: number): number[] =>
    c
      .on(stream)
      .filter((f) => f.type === T.WINDOW_UPDATE)
      .map((f) => f.payload.readUInt32BE(0));
  /** The error code of the stream's RST_STREAM, if one came. */
  const resetCode = (c: RawClient, stream: number): number | undefined =>
    c
      .on(stream)
      .find((f) => f.type === T.RST_STREAM)
      ?.payload.readUInt32BE(0);
  const answered = (c: RawClient, stream: number) => () =>
    c.on(stream).some((f) => f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0);
  /** Waits for a call refused on its head: UNAVAILABLE, then RST_STREAM NO_ERROR, and no window past the admission window. */
  const refusedOnHead = async (c: RawClient, stream: number): Promise<void> => {
    await waitFor(() => c.on(stream).some((f) => f.type === T.RST_STREAM), 5000, 'RST_STREAM');
    assert.ok(answered(c, stream)(), 'the status came first');
    assert.equal(c.headerFields(stream).get('grpc-status'), String(Code.UNAVAILABLE));
    assert.equal(resetCode(c, stream), E.NO_ERROR);
    assert.deepEqual(streamUpdates(c, stream), [], 'refused on its head: no more window');
  };
  /**
   * Sends `message` on `stream` (its HEADERS sent): 16 KiB, then the rest once the stream's
   * WINDOW_UPDATE came; requires grpc-status 0 and returns the answer's first uint32.
   */
  const sendAdmitted = async (c: RawClient, stream: number, message: Buffer): Promise<number> => {
    c.write(frame(T.DATA, 0, stream, message.subarray(0, 16_384)));
    await waitFor(() => streamUpdates(c, stream).length === 1, 5000, `stream ${stream}'s WINDOW_UPDATE`);
    c.write(frame(T.DATA, F.END_STREAM, stream, message.subarray(16_384)));
    await waitFor(answered(c, stream), 5000, `the answer on stream ${stream}`);
    assert.equal(c.headerFields(stream).get('grpc-status'), '0');
    return c
      .on(stream)
      .find((f) => f.type === T.DATA)!
      .payload.readUInt32BE(5);
  };
  /** Four DATA frames of `message`'s first 65,535 bytes: all of the admission window. */
  const admissionFrames = (stream: number, message: Buffer): Buffer[] =>
    [0, 1, 2, 3].map((i) =>
      frame(T.DATA, 0, stream, message.subarray(16_384 * i, Math.min(ADMISSION, 16_384 * (i + 1)))),
    );

  it('advertises the HTTP/2 default window for new streams', async () => {
    const c = new RawClient(server.port);
    try {
      c.write(PREFACE, settings([]));
      await waitFor(
        () => c.frames.some((f) => f.type === T.SETTINGS && (f.flags & F.ACK) === 0),
        5000,
        'SETTINGS',
      );
      const ours = c.frames.find((f) => f.type === T.SETTINGS && (f.flags & F.ACK) === 0)!.payload;
      const entries = new Map<number, number>();
      for (let at = 0; at + 6 <= ours.byteLength; at += 6)
        entries.set(ours.readUInt16BE(at), ours.readUInt32BE(at + 2));
      assert.equal(entries.get(INITIAL_WINDOW_SIZE), ADMISSION);
    } finally {
      c.close();
    }
  });

  it('an admitted large message gets the whole window once its head is read, and is answered', async () => {
    const c = new RawClient(server.port);
    try {
      const message = grpcMessage(Buffer.alloc(600_000, 1));
      c.write(PREFACE, settings([]), frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Length')));
      assert.equal(await sendAdmitted(c, 1, message), 600_000);
      assert.equal(streamUpdates(c, 1)[0], WINDOW - ADMISSION + 16_384);
    } finally {
      c.close();
    }
  });

  it('more than the admission window before the head is admitted is a flow-control error of that stream only', async () => {
    const c = new RawClient(server.port);
    try {
      const message = grpcMessage(Buffer.alloc(600_000, 1));
      c.write(
        PREFACE,
        settings([]),
        frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Length')),
        frame(T.DATA, 0, 1, message.subarray(0, ADMISSION + 1)),
        frame(T.HEADERS, F.END_HEADERS, 3, request('/t.Svc/Length')),
        frame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.alloc(10))),
      );
      await waitFor(answered(c, 3), 5000, 'the answer on stream 3');
      assert.equal(resetCode(c, 1), E_FLOW);
      assert.equal(c.headerFields(3).get('grpc-status'), '0');
    } finally {
      c.close();
    }
  });

  it('a call refused on its head gets no more window: its status, then RST_STREAM NO_ERROR once the window is used', async () => {
    const c = new RawClient(server.port);
    try {
      const message = grpcMessage(Buffer.alloc(600_000, 2));
      c.write(
        PREFACE,
        settings([]),
        frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Refuse')),
        ...admissionFrames(1, message),
      );
      await refusedOnHead(c, 1);
      // The connection goes on.
      c.write(
        frame(T.HEADERS, F.END_HEADERS, 3, request('/t.Svc/Length')),
        frame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.alloc(1000))),
      );
      await waitFor(answered(c, 3), 5000, 'the answer on stream 3');
      assert.equal(c.headerFields(3).get('grpc-status'), '0');
      assert.deepEqual(streamUpdates(c, 3), [], 'a message within the window needs no update');
      assert.equal(
        c.frames.find((f) => f.type === T.GOAWAY),
        undefined,
      );
    } finally {
      c.close();
    }
  });

  it('a compressed message is admitted on what its head inflates to: refused ones get no more window, admitted ones are answered', async () => {
    // Incompressible bytes: each compressed message is larger than the admission window.
    const noise = randomBytes(600_000);
    const refused = gzipSync(Buffer.concat([Buffer.from('refuse'), noise]));
    const admitted = deflateSync(Buffer.concat([Buffer.from('accept'), noise]));
    assert.ok(refused.byteLength > ADMISSION && admitted.byteLength > ADMISSION);
    const c = new RawClient(server.port);
    try {
      c.write(
        PREFACE,
        settings([]),
        frame(
          T.HEADERS,
          F.END_HEADERS,
          1,
          request('/t.Svc/RefuseMarked', undefined, [['grpc-encoding', 'gzip']]),
        ),
        ...admissionFrames(1, grpcMessage(refused, true)),
      );
      await refusedOnHead(c, 1);
      c.write(
        frame(
          T.HEADERS,
          F.END_HEADERS,
          3,
          request('/t.Svc/RefuseMarked', undefined, [['grpc-encoding', 'deflate']]),
        ),
      );
      assert.equal(await sendAdmitted(c, 3, grpcMessage(admitted, true)), 600_006, 'the decompressed length');
    } finally {
      c.close();
    }
  });

  it('an early answer still waiting for window is sent whole before the used-up stream is reset', async () => {
    const c = new RawClient(server.port);
    try {
      // No window for the server's DATA: the 415 answer's body waits; the client meanwhile uses
      // all of its 64 KiB.
      c.write(
        PREFACE,
        settings([[INITIAL_WINDOW_SIZE, 0]]),
        frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Length', 'text/plain')),
        ...admissionFrames(1, Buffer.alloc(ADMISSION)),
      );
      await waitFor(() => c.on(1).some((f) => f.type === T.HEADERS), 5000, 'the 415 head');
      const barrier = c.frames.length;
      c.write(frame(T.PING, 0, 0, Buffer.from('barrier!')));
      await waitFor(() => c.frames.slice(barrier).some((f) => f.type === T.PING), 5000, 'the PING answer');
      assert.equal(resetCode(c, 1), undefined, 'no reset while the answer waits');
      c.write(frame(T.WINDOW_UPDATE, 0, 1, u32(1 << 20)));
      await waitFor(() => c.on(1).some((f) => f.type === T.RST_STREAM), 5000, 'RST_STREAM');
      const frames = c.on(1);
      const reset = frames.findIndex((f) => f.type === T.RST_STREAM);
      const ended = frames.findIndex((f) => f.type === T.DATA && (f.flags & F.END_STREAM) !== 0);
      assert.ok(ended >= 0 && ended < reset, 'the whole answer, then the reset');
      assert.equal(frames[reset]!.payload.readUInt32BE(0), E.NO_ERROR);
      const body = Buffer.concat(frames.filter((f) => f.type === T.DATA).map((f) => f.payload));
      assert.match(body.toString(), /This port serves gRPC/);
    } finally {
      c.close();
    }
  });

  it('a streaming call gets the whole window at once', async () => {
    const c = new RawClient(server.port);
    try {
      c.write(PREFACE, settings([]), frame(T.HEADERS, F.END_HEADERS, 1, request('/t.Svc/Chat')));
      await waitFor(() => streamUpdates(c, 1).length === 1, 5000, "the stream's WINDOW_UPDATE");
      assert.equal(streamUpdates(c, 1)[0], WINDOW - ADMISSION);
      c.write(frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(500_000))));
      await waitFor(answered(c, 1), 5000, 'the trailers');
      assert.equal(c.headerFields(1).get('grpc-status'), '0');
    } finally {
      c.close();
    }
  });

  it('node:http2 clients: large calls refused on their head end with their status, admitted ones are answered', async () => {
    // node:http2 counts requests' unsent DATA against maxSessionMemory (10 MB by default) and
    // resets streams past it (ENHANCE_YOUR_CALM) whatever the server: 20 600 KB calls held to
    // the admission window are 12 MB (the overload bench's generator raises it the same way).
    const client = http2.connect(`http://127.0.0.1:${server.port}`, { maxSessionMemory: 1000 });
    client.on('error', () => undefined);
    const call = (method: string, bytes: number): Promise<{ status: string | undefined; body: Buffer }> =>
      new Promise((resolve, reject) => {
        const req = client.request({
          ':method': 'POST',
          ':path': `/t.Svc/${method}`,
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        const parts: Buffer[] = [];
        let status: string | undefined;
        req.on('response', (headers) => {
          status ??= headers['grpc-status'] as string | undefined;
        });
        req.on('trailers', (trailers: http2.IncomingHttpHeaders) => {
          status = trailers['grpc-status'] as string | undefined;
        });
        req.on('data', (chunk: Buffer) => parts.push(chunk));
        req.on('close', () => {
          resolve({ status, body: Buffer.concat(parts) });
        });
        req.on('error', reject);
        req.end(grpcMessage(Buffer.alloc(bytes, 5)));
      });
    try {
      const refused = await Promise.all(Array.from({ length: 20 }, () => call('Refuse', 600_000)));
      assert.deepEqual(
        refused.map((r) => r.status),
        refused.map(() => String(Code.UNAVAILABLE)),
      );
      const ok = await Promise.all(Array.from({ length: 5 }, () => call('Length', 600_000)));
      for (const r of ok) {
        assert.equal(r.status, '0');
        assert.equal(r.body.readUInt32BE(5), 600_000);
      }
    } finally {
      client.close();
    }
  });
});
