/**
 * The gRPC server's own HTTP/2 transport (grpcTransport 'lean', frontends/grpc/h2) at the
 * frame level, over raw sockets: protocol errors and floods end the connection with the
 * GOAWAY code RFC 9113 asks for (and the listener keeps serving new connections), stream
 * errors reset only their stream, flow control with tiny client windows still delivers a
 * 34 MB response whole, DATA frames follow the client's SETTINGS_MAX_FRAME_SIZE, RST_STREAM
 * cancels the call, the output lease is released only when the response is on the socket,
 * close() drains, and request bytes read straight into the message land where they belong
 * (padding, other streams and bytes past the message stay out of it).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { type Socket, connect } from 'node:net';
import { Code, ServingError } from '@visionserve/protocol';
import { type RunningGrpcServer, startGrpcServer } from '../src/frontends/grpc/index.js';
import { startH2Listener } from '../src/frontends/grpc/h2/h2-server.js';
import type { GrpcListener } from '../src/frontends/grpc/grpc-listener.js';
import { createHash, randomBytes } from 'node:crypto';
import type { GrpcService } from '../src/frontends/grpc/index.js';
import { createJsonLogger } from '../src/util/logger.js';
import { frame, hpack, settings, u32 } from './h2-wire.js';
import type { RequestEnd } from '../src/frontends/shared/request-observer.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { connectionGuardSettings, grpcServerSettings } from '../src/compose/config-settings.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
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
const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8 } as const;
const E = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 11,
} as const;

const call = (method: string): Buffer =>
  hpack([
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', `/t.Svc/${method}`],
    [':authority', 'x'],
    ['content-type', 'application/grpc'],
    ['te', 'trailers'],
  ]);

function grpcMessage(body: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + body.byteLength);
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

/** A raw HTTP/2 client connection: writes bytes, parses the server's frames as they come. */
class RawClient {
  readonly frames: Frame[] = [];
  /** Socket errors seen (codes), e.g. ECONNRESET when the server reset the connection. */
  readonly errors: string[] = [];
  closed = false;
  private buffered = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  readonly socket: Socket;
  onFrame: ((f: Frame) => void) | undefined;

  constructor(port: number) {
    this.socket = connect({ host: '127.0.0.1', port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      while (this.buffered.length >= 9) {
        const length = this.buffered.readUIntBE(0, 3);
        if (this.buffered.length < 9 + length) break;
        const f: Frame = {
          type: this.buffered[3]!,
          flags: this.buffered[4]!,
          stream: this.buffered.readUInt32BE(5) & 0x7fffffff,
          payload: Buffer.from(this.buffered.subarray(9, 9 + length)),
        };
        this.buffered = this.buffered.subarray(9 + length);
        if (f.type !== T.DATA) this.frames.push(f);
        this.onFrame?.(f);
      }
      this.wake();
    });
    this.socket.on('error', (error: NodeJS.ErrnoException) => {
      this.errors.push(error.code ?? error.message);
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  write(...chunks: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(chunks));
  }

  /** Resolves when `test` holds (checked on every frame and at close), or rejects after `ms`. */
  async until(test: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + ms;
    while (!test()) {
      if (this.closed && !test()) throw new Error(`connection closed before ${what}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  goawayCode(): number | undefined {
    const g = this.frames.find((f) => f.type === T.GOAWAY);
    return g?.payload.readUInt32BE(4);
  }

  reset(stream: number): number | undefined {
    const r = this.frames.find((f) => f.type === T.RST_STREAM && f.stream === stream);
    return r?.payload.readUInt32BE(0);
  }

  async goaway(): Promise<number> {
    await this.until(() => this.goawayCode() !== undefined, 5000, 'GOAWAY');
    await this.until(() => this.closed, 5000, 'the server closing the connection');
    return this.goawayCode()!;
  }

  close(): void {
    this.socket.destroy();
  }
}

interface Gate {
  open(answer?: 'length' | 'large' | 'error'): void;
}

const BIG = 34 * 1024 * 1024;
/** The byte at offset i of the Big response. */
const bigByte = (i: number): number => (i * 7 + (i >>> 16)) & 0xff;

describe('gRPC over our own HTTP/2 (frame level)', () => {
  let server: RunningGrpcServer;
  const logs: string[] = [];
  const ends: RequestEnd[] = [];
  const big = Buffer.alloc(BIG);
  for (let i = 0; i < BIG; i++) big[i] = bigByte(i);
  let holdStarted: (signal: AbortSignal) => void = () => undefined;
  /**
   * Told when a Gated call has its whole message; the call answers once `open` is called: with
   * the message's length (4 bytes), 100,000 bytes ('large': not one coalesced write) or an error.
   */
  let gated: (gate: Gate) => void = () => undefined;
  let leaseReleased = 0;

  const service: GrpcService = {
    name: 't.Svc',
    methods: {
      Echo: { handler: (message) => Promise.resolve([message.slice()]) },
      Length: { handler: (message) => Promise.resolve([u32(message.byteLength)]) },
      Gated: {
        handler: (message) =>
          new Promise((resolve, reject) => {
            gated({
              open: (answer = 'length') => {
                if (answer === 'error') reject(new ServingError(Code.FAILED_PRECONDITION, 'gate says no'));
                else if (answer === 'large') resolve([Buffer.alloc(100_000, 3)]);
                else resolve([u32(message.byteLength)]);
              },
            });
          }),
      },
      Big: {
        handler: (_message, context) => {
          context.outputLease?.hold(() => {
            leaseReleased++;
          });
          return Promise.resolve([big.subarray(0, 1024), big.subarray(1024)]);
        },
      },
      Hold: {
        handler: (_message, context) =>
          new Promise((_resolve, reject) => {
            context.signal.addEventListener(
              'abort',
              () => {
                reject(context.signal.reason as Error);
              },
              {
                once: true,
              },
            );
            holdStarted(context.signal);
          }),
      },
    },
  };

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      // Raw clients here write whole messages without waiting for window (the admission
      // window has its own tests in grpc-h2-limits).
      admissionWindowBytes: 1 << 20,
      transport: 'lean',
      logger: createJsonLogger({ level: 'warn', write: (line) => logs.push(line) }),
      maxConcurrentStreams: 4,
      bodyTimeoutMs: 5000,
      observer: {
        begin: () => (end) => {
          ends.push(end);
        },
      },
      services: [service],
    });
  });

  after(async () => {
    await server.close(1000);
    assert.deepEqual(
      logs.filter((l) => /"level":"error"/.test(l)),
      [],
    );
  });

  /** A well-formed call on a new connection (node's own client): echo and status 0. */
  async function healthy(): Promise<void> {
    const client = http2.connect(`http://127.0.0.1:${server.port}`);
    try {
      const answer = await new Promise<{ body: Buffer; status: string | undefined }>((resolve, reject) => {
        const stream = client.request({
          ':method': 'POST',
          ':path': '/t.Svc/Echo',
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        const body: Buffer[] = [];
        let status: string | undefined;
        stream.on('data', (c: Buffer) => body.push(c));
        stream.on('trailers', (h: http2.IncomingHttpHeaders) => {
          status = String(h['grpc-status']);
        });
        stream.on('error', reject);
        stream.on('close', () => {
          resolve({ body: Buffer.concat(body), status });
        });
        stream.end(grpcMessage(Buffer.from('ok')));
      });
      assert.equal(answer.status, '0');
      assert.deepEqual(answer.body, grpcMessage(Buffer.from('ok')));
    } finally {
      client.close();
    }
  }

  /** Opens a raw connection with the preface and an empty SETTINGS. */
  function open(extra: readonly (readonly [number, number])[] = []): RawClient {
    const c = new RawClient(server.port);
    c.write(PREFACE, settings(extra));
    return c;
  }

  describe('connection errors: GOAWAY with the code RFC 9113 asks for, then a new connection is served', () => {
    const cases: [string, () => Buffer, number][] = [
      [
        'a preface that is not HTTP/2',
        () => Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
        E.PROTOCOL_ERROR,
      ],
      [
        'a first frame that is not SETTINGS',
        () => Buffer.concat([PREFACE, frame(T.PING, 0, 0, Buffer.alloc(8))]),
        E.PROTOCOL_ERROR,
      ],
      [
        'a frame over SETTINGS_MAX_FRAME_SIZE',
        () => frame(T.DATA, 0, 1, Buffer.alloc(16), 1024 * 1024 + 1),
        E.FRAME_SIZE_ERROR,
      ],
      ['DATA on stream 0', () => frame(T.DATA, 0, 0, Buffer.alloc(4)), E.PROTOCOL_ERROR],
      ['DATA on an idle stream', () => frame(T.DATA, 0, 7, Buffer.alloc(4)), E.PROTOCOL_ERROR],
      ['HEADERS on an even stream', () => frame(T.HEADERS, F.END_HEADERS, 2, call('Echo')), E.PROTOCOL_ERROR],
      ['HEADERS on stream 0', () => frame(T.HEADERS, F.END_HEADERS, 0, call('Echo')), E.PROTOCOL_ERROR],
      [
        'a stream id lower than one already used',
        () =>
          Buffer.concat([
            frame(T.HEADERS, F.END_HEADERS, 5, call('Echo')),
            frame(T.HEADERS, F.END_HEADERS, 3, call('Echo')),
          ]),
        E.PROTOCOL_ERROR,
      ],
      [
        'SETTINGS not a multiple of 6 bytes',
        () => frame(T.SETTINGS, 0, 0, Buffer.alloc(5)),
        E.FRAME_SIZE_ERROR,
      ],
      ['SETTINGS ACK with a payload', () => frame(T.SETTINGS, F.ACK, 0, Buffer.alloc(6)), E.FRAME_SIZE_ERROR],
      ['SETTINGS on a stream', () => frame(T.SETTINGS, 0, 1), E.PROTOCOL_ERROR],
      ['SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1', () => settings([[4, 2 ** 31]]), E.FLOW_CONTROL_ERROR],
      ['SETTINGS_MAX_FRAME_SIZE under 16384', () => settings([[5, 1000]]), E.PROTOCOL_ERROR],
      ['SETTINGS_ENABLE_PUSH 2', () => settings([[2, 2]]), E.PROTOCOL_ERROR],
      ['a PING of 7 bytes', () => frame(T.PING, 0, 0, Buffer.alloc(7)), E.FRAME_SIZE_ERROR],
      ['a PING on a stream', () => frame(T.PING, 0, 1, Buffer.alloc(8)), E.PROTOCOL_ERROR],
      ['WINDOW_UPDATE of 0 on the connection', () => frame(T.WINDOW_UPDATE, 0, 0, u32(0)), E.PROTOCOL_ERROR],
      [
        'a connection window past 2^31-1',
        () => frame(T.WINDOW_UPDATE, 0, 0, u32(2 ** 31 - 1)),
        E.FLOW_CONTROL_ERROR,
      ],
      ['WINDOW_UPDATE of 3 bytes', () => frame(T.WINDOW_UPDATE, 0, 0, Buffer.alloc(3)), E.FRAME_SIZE_ERROR],
      ['RST_STREAM on stream 0', () => frame(T.RST_STREAM, 0, 0, u32(8)), E.PROTOCOL_ERROR],
      ['RST_STREAM on an idle stream', () => frame(T.RST_STREAM, 0, 9, u32(8)), E.PROTOCOL_ERROR],
      [
        'CONTINUATION without HEADERS',
        () => frame(T.CONTINUATION, F.END_HEADERS, 1, call('Echo')),
        E.PROTOCOL_ERROR,
      ],
      [
        'another frame inside a header block',
        () => Buffer.concat([frame(T.HEADERS, 0, 1, call('Echo')), frame(T.PING, 0, 0, Buffer.alloc(8))]),
        E.PROTOCOL_ERROR,
      ],
      [
        'a header block that is not HPACK',
        () => frame(T.HEADERS, F.END_HEADERS, 1, Buffer.from([0xbe])),
        E.COMPRESSION_ERROR,
      ],
      [
        'HEADERS padding longer than the frame',
        () =>
          frame(T.HEADERS, F.END_HEADERS | F.PADDED, 1, Buffer.concat([Buffer.from([200]), call('Echo')])),
        E.PROTOCOL_ERROR,
      ],
      [
        'DATA padding longer than the frame',
        () =>
          Buffer.concat([
            frame(T.HEADERS, F.END_HEADERS, 1, call('Echo')),
            frame(T.DATA, F.PADDED, 1, Buffer.from([250, 0, 0, 0])),
          ]),
        E.PROTOCOL_ERROR,
      ],
      ['PUSH_PROMISE from a client', () => frame(T.PUSH_PROMISE, F.END_HEADERS, 1, u32(2)), E.PROTOCOL_ERROR],
      ['GOAWAY of 4 bytes', () => frame(T.GOAWAY, 0, 0, u32(0)), E.FRAME_SIZE_ERROR],
      // Floods.
      [
        'a PING flood',
        () => Buffer.concat(Array.from({ length: 10_001 }, () => frame(T.PING, 0, 0, Buffer.alloc(8)))),
        E.ENHANCE_YOUR_CALM,
      ],
      [
        'a SETTINGS flood',
        () => Buffer.concat(Array.from({ length: 10_001 }, () => frame(T.SETTINGS, 0, 0))),
        E.ENHANCE_YOUR_CALM,
      ],
      [
        'rapid reset (HEADERS then RST_STREAM, 1001 times)',
        () => {
          const block = call('Echo');
          const frames: Buffer[] = [];
          for (let i = 0; i < 1001; i++) {
            const id = 1 + 2 * i;
            frames.push(frame(T.HEADERS, F.END_HEADERS, id, block), frame(T.RST_STREAM, 0, id, u32(8)));
          }
          return Buffer.concat(frames);
        },
        E.ENHANCE_YOUR_CALM,
      ],
      [
        'a CONTINUATION flood (a header block that grows without end)',
        () => {
          const filler = hpack([['x-fill', 'y'.repeat(16_000)]]);
          const frames = [frame(T.HEADERS, 0, 1, call('Echo'))];
          for (let i = 0; i < 100; i++) frames.push(frame(T.CONTINUATION, 0, 1, filler));
          return Buffer.concat(frames);
        },
        E.ENHANCE_YOUR_CALM,
      ],
      [
        'empty CONTINUATION frames',
        () =>
          Buffer.concat([
            frame(T.HEADERS, 0, 1, call('Echo')),
            ...Array.from({ length: 1001 }, () => frame(T.CONTINUATION, 0, 1)),
          ]),
        E.ENHANCE_YOUR_CALM,
      ],
      [
        'empty DATA frames',
        () =>
          Buffer.concat([
            frame(T.HEADERS, F.END_HEADERS, 1, call('Echo')),
            ...Array.from({ length: 1001 }, () => frame(T.DATA, 0, 1)),
          ]),
        E.ENHANCE_YOUR_CALM,
      ],
      [
        'unknown frame types',
        () => Buffer.concat(Array.from({ length: 1001 }, () => frame(0x20, 0, 0, Buffer.alloc(4)))),
        E.ENHANCE_YOUR_CALM,
      ],
    ];
    for (const [name, bytes, code] of cases) {
      it(`${name} -> GOAWAY ${code}`, async () => {
        const c = new RawClient(server.port);
        const payload = bytes();
        const raw = payload.subarray(0, PREFACE.length).equals(PREFACE) || name.includes('preface');
        c.write(...(raw ? [payload] : [PREFACE, settings([]), payload]));
        try {
          assert.equal(await c.goaway(), code);
        } finally {
          c.close();
        }
        await healthy();
      });
    }
  });

  describe('stream errors: RST_STREAM, the connection goes on', () => {
    it('refuses streams past SETTINGS_MAX_CONCURRENT_STREAMS with REFUSED_STREAM', async () => {
      const c = open();
      try {
        const frames: Buffer[] = [];
        for (let i = 0; i < 5; i++) frames.push(frame(T.HEADERS, F.END_HEADERS, 1 + 2 * i, call('Echo')));
        c.write(...frames);
        await c.until(() => c.reset(9) !== undefined, 5000, 'RST_STREAM on stream 9');
        assert.equal(c.reset(9), E.REFUSED_STREAM);
        assert.equal(c.reset(1), undefined);
        // The first four still answer.
        c.write(frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.from('a'))));
        await c.until(() =>
          c.frames.some((f) => f.type === T.HEADERS && f.stream === 1 && (f.flags & F.END_STREAM) !== 0),
        );
        assert.equal(c.goawayCode(), undefined);
      } finally {
        c.close();
      }
    });

    it('WINDOW_UPDATE of 0 on a stream and a header name in upper case reset that stream only', async () => {
      const c = open();
      try {
        c.write(
          frame(T.HEADERS, F.END_HEADERS, 1, call('Echo')),
          frame(T.WINDOW_UPDATE, 0, 1, u32(0)),
          frame(T.HEADERS, F.END_HEADERS, 3, Buffer.concat([call('Echo'), hpack([['X-Upper', 'v']])])),
          frame(T.HEADERS, F.END_HEADERS, 5, call('Echo')),
          frame(T.DATA, F.END_STREAM, 5, grpcMessage(Buffer.from('b'))),
        );
        await c.until(() =>
          c.frames.some((f) => f.type === T.HEADERS && f.stream === 5 && (f.flags & F.END_STREAM) !== 0),
        );
        assert.equal(c.reset(1), E.PROTOCOL_ERROR);
        assert.equal(c.reset(3), E.PROTOCOL_ERROR);
        assert.equal(c.goawayCode(), undefined);
      } finally {
        c.close();
      }
    });
    it('DATA on a stream the client ended gets STREAM_CLOSED once; PRIORITY on itself or of the wrong length resets', async () => {
      const c = open();
      try {
        c.write(
          frame(T.HEADERS, F.END_HEADERS, 1, call('Echo')),
          frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.from('a'))),
        );
        await c.until(() =>
          c.frames.some((f) => f.type === T.HEADERS && f.stream === 1 && (f.flags & F.END_STREAM) !== 0),
        );
        const self = Buffer.alloc(5);
        self.writeUInt32BE(7, 0);
        c.write(
          frame(T.DATA, 0, 1, Buffer.from('late')),
          frame(T.DATA, 0, 1, Buffer.from('later')),
          frame(T.PRIORITY, 0, 7, self),
          frame(T.PRIORITY, 0, 1, Buffer.alloc(4)),
          frame(T.HEADERS, F.END_HEADERS, 3, call('Echo')),
          frame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.from('b'))),
        );
        await c.until(() =>
          c.frames.some((f) => f.type === T.HEADERS && f.stream === 3 && (f.flags & F.END_STREAM) !== 0),
        );
        const resets = c.frames
          .filter((f) => f.type === T.RST_STREAM)
          .map((f) => [f.stream, f.payload.readUInt32BE(0)]);
        assert.deepEqual(resets, [
          [1, E.STREAM_CLOSED],
          [7, E.PROTOCOL_ERROR],
          [1, E.FRAME_SIZE_ERROR],
        ]);
        assert.equal(c.goawayCode(), undefined);
      } finally {
        c.close();
      }
    });

    it('an empty :path and a content-length the DATA does not match reset the stream with PROTOCOL_ERROR', async () => {
      const c = open();
      const withHeaders = (path: string, extra: readonly (readonly [string, string])[]): Buffer =>
        hpack([
          [':method', 'POST'],
          [':scheme', 'http'],
          [':path', path],
          ['content-type', 'application/grpc'],
          ...extra,
        ]);
      try {
        const message = grpcMessage(Buffer.from('c'));
        c.write(
          frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, withHeaders('', [])),
          frame(T.HEADERS, F.END_HEADERS, 3, withHeaders('/t.Svc/Echo', [['content-length', '1']])),
          frame(T.DATA, F.END_STREAM, 3, message),
          frame(T.HEADERS, F.END_HEADERS, 5, withHeaders('/t.Svc/Echo', [['content-length', '100']])),
          frame(T.DATA, F.END_STREAM, 5, message),
          frame(
            T.HEADERS,
            F.END_HEADERS | F.END_STREAM,
            7,
            withHeaders('/t.Svc/Echo', [['content-length', '6']]),
          ),
          frame(T.HEADERS, F.END_HEADERS, 9, withHeaders('/t.Svc/Echo', [['content-length', '0x6']])),
          frame(
            T.HEADERS,
            F.END_HEADERS,
            11,
            withHeaders('/t.Svc/Echo', [['content-length', String(message.byteLength)]]),
          ),
          frame(T.DATA, F.END_STREAM, 11, message),
        );
        await c.until(() =>
          c.frames.some((f) => f.type === T.HEADERS && f.stream === 11 && (f.flags & F.END_STREAM) !== 0),
        );
        for (const id of [1, 3, 5, 7, 9]) assert.equal(c.reset(id), E.PROTOCOL_ERROR, `stream ${id}`);
        assert.equal(c.reset(11), undefined);
        assert.equal(c.goawayCode(), undefined);
      } finally {
        c.close();
      }
    });

    it('answers a request that is not gRPC with 415 and a text body, sent within the client window', async () => {
      const c = open([[4, 0]]);
      const body: Buffer[] = [];
      let ended = false;
      c.onFrame = (f) => {
        if (f.type !== T.DATA || f.stream !== 1) return;
        body.push(f.payload);
        if ((f.flags & F.END_STREAM) !== 0) ended = true;
      };
      try {
        c.write(
          frame(
            T.HEADERS,
            F.END_HEADERS | F.END_STREAM,
            1,
            hpack([
              [':method', 'GET'],
              [':scheme', 'http'],
              [':path', '/'],
            ]),
          ),
        );
        await c.until(() => c.frames.some((f) => f.type === T.HEADERS && f.stream === 1));
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(body.length, 0, 'DATA sent past a zero window');
        c.write(frame(T.WINDOW_UPDATE, 0, 1, u32(1000)));
        await c.until(() => ended, 5000, 'the end of the 415 body');
        assert.match(Buffer.concat(body).toString(), /application\/grpc/);
      } finally {
        c.close();
      }
      const client = http2.connect(`http://127.0.0.1:${server.port}`);
      try {
        const answer = await new Promise<{ status: number; type: string; text: string }>(
          (resolve, reject) => {
            const stream = client.request({ ':path': '/' });
            let status = 0;
            let type = '';
            const parts: Buffer[] = [];
            stream.on('response', (h) => {
              status = Number(h[':status']);
              type = String(h['content-type']);
            });
            stream.on('data', (chunk: Buffer) => parts.push(chunk));
            stream.on('error', reject);
            stream.on('end', () => {
              resolve({ status, type, text: Buffer.concat(parts).toString() });
            });
            stream.end();
          },
        );
        assert.equal(answer.status, 415);
        assert.equal(answer.type, 'text/plain');
        assert.match(answer.text, /serves gRPC/);
      } finally {
        client.close();
      }
    });
  });

  /**
   * Calls Big on a raw connection with the given settings. With `topUp` > 0 the client keeps
   * both windows small: whenever one falls under `topUp` it grants `topUp` more; with 0 it
   * opens the connection window to the maximum up front. Returns the DATA frame sizes, the
   * body, and whether the server ever sent past a window.
   */
  async function bigCall(
    settingsEntries: readonly (readonly [number, number])[],
    topUp: number,
    onData?: (received: number) => void,
  ): Promise<{ sizes: number[]; body: Buffer; overrun: boolean }> {
    const c = open(settingsEntries);
    const initial = settingsEntries.find(([id]) => id === 4)?.[1] ?? 65_535;
    const sizes: number[] = [];
    const parts: Buffer[] = [];
    let streamWindow = initial;
    let connectionWindow = 65_535;
    let overrun = false;
    let received = 0;
    let done = false;
    c.onFrame = (f) => {
      if (f.type === T.HEADERS && f.stream === 1 && (f.flags & F.END_STREAM) !== 0) done = true;
      if (f.type !== T.DATA) return;
      sizes.push(f.payload.byteLength);
      parts.push(f.payload);
      streamWindow -= f.payload.byteLength;
      connectionWindow -= f.payload.byteLength;
      if (streamWindow < 0 || connectionWindow < 0) overrun = true;
      received += f.payload.byteLength;
      onData?.(received);
      if (topUp > 0 && streamWindow < topUp) {
        c.write(frame(T.WINDOW_UPDATE, 0, 1, u32(topUp)));
        streamWindow += topUp;
      }
      if (topUp > 0 && connectionWindow < topUp) {
        c.write(frame(T.WINDOW_UPDATE, 0, 0, u32(topUp)));
        connectionWindow += topUp;
      }
    };
    try {
      if (topUp === 0) {
        c.write(frame(T.WINDOW_UPDATE, 0, 0, u32(2 ** 31 - 1 - 65_535)));
        connectionWindow = 2 ** 31 - 1;
      }
      c.write(
        frame(T.HEADERS, F.END_HEADERS, 1, call('Big')),
        frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(0))),
      );
      await c.until(() => done, 60_000, 'the end of the Big response');
      return { sizes, body: Buffer.concat(parts), overrun };
    } finally {
      c.close();
    }
  }

  function checkBig(body: Buffer): void {
    assert.equal(body.byteLength, 5 + BIG);
    assert.equal(body.readUInt32BE(1), BIG);
    for (let i = 0; i < BIG; i += 4099) assert.equal(body[5 + i], bigByte(i), `byte ${i}`);
    assert.equal(body[5 + BIG - 1], bigByte(BIG - 1));
  }

  it('sends a 34 MB response whole and in order to a client with tiny windows (1,000 B initial, 16 KiB grants)', async () => {
    const { body, overrun, sizes } = await bigCall([[4, 1000]], 16_384);
    checkBig(body);
    assert.equal(overrun, false, 'the server sent past a window');
    assert.ok(sizes.every((s) => s <= 2 * 16_384));
  });

  it('honours the client SETTINGS_MAX_FRAME_SIZE: 16 KiB by default, 20,000 and 1 MiB when asked', async () => {
    const open16 = await bigCall([[4, 2 ** 31 - 1]], 0);
    checkBig(open16.body);
    assert.equal(open16.overrun, false);
    assert.equal(Math.max(...open16.sizes), 16_384);
    const at20k = await bigCall(
      [
        [4, 2 ** 31 - 1],
        [5, 20_000],
      ],
      0,
    );
    checkBig(at20k.body);
    assert.equal(Math.max(...at20k.sizes), 20_000);
    const at1m = await bigCall(
      [
        [4, 2 ** 31 - 1],
        [5, 1024 * 1024],
      ],
      0,
    );
    checkBig(at1m.body);
    assert.equal(Math.max(...at1m.sizes), 1024 * 1024);
    assert.ok(at1m.sizes.length < 40, `${at1m.sizes.length} frames`);
  });

  it('node:http2 clients with small windows get the 34 MB response too', async () => {
    const client = http2.connect(`http://127.0.0.1:${server.port}`, {
      settings: { initialWindowSize: 16_384 },
    });
    try {
      const body = await new Promise<Buffer>((resolve, reject) => {
        const stream = client.request({
          ':method': 'POST',
          ':path': '/t.Svc/Big',
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        const parts: Buffer[] = [];
        stream.on('data', (c: Buffer) => parts.push(c));
        stream.on('error', reject);
        stream.on('close', () => {
          resolve(Buffer.concat(parts));
        });
        stream.end(grpcMessage(Buffer.alloc(0)));
      });
      checkBig(body);
    } finally {
      client.close();
    }
  });

  it('releases the output lease only once the response bytes are all handed to the socket', async () => {
    const before = leaseReleased;
    let releasedEarly = false;
    const { body } = await bigCall([[4, 65_535]], 65_535, (received) => {
      if (received < 5 + BIG - 1024 * 1024 && leaseReleased > before) releasedEarly = true;
    });
    checkBig(body);
    assert.equal(releasedEarly, false, 'lease released while the response still waited for window');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(leaseReleased, before + 1);
  });

  it('RST_STREAM from the client aborts the call (CANCELLED), mid-message and while the handler runs', async () => {
    const c = open();
    try {
      // Mid-message: half a message, then a reset.
      const message = grpcMessage(Buffer.alloc(1000));
      const endsBefore = ends.length;
      c.write(
        frame(T.HEADERS, F.END_HEADERS, 1, call('Echo')),
        frame(T.DATA, 0, 1, message.subarray(0, 500)),
      );
      c.write(frame(T.RST_STREAM, 0, 1, u32(E.CANCEL)));
      await waitFor(() => ends.length > endsBefore);
      assert.equal(ends.at(-1)!.code, Code.CANCELLED);
      // While the handler runs.
      const started = new Promise<AbortSignal>((resolve) => {
        holdStarted = resolve;
      });
      c.write(
        frame(T.HEADERS, F.END_HEADERS, 3, call('Hold')),
        frame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.alloc(0))),
      );
      const signal = await started;
      assert.equal(signal.aborted, false);
      c.write(frame(T.RST_STREAM, 0, 3, u32(E.CANCEL)));
      await waitFor(() => signal.aborted);
      assert.ok(signal.reason instanceof ServingError);
      assert.equal(signal.reason.code, Code.CANCELLED);
      // The connection goes on.
      c.write(
        frame(T.HEADERS, F.END_HEADERS, 5, call('Echo')),
        frame(T.DATA, F.END_STREAM, 5, grpcMessage(Buffer.from('c'))),
      );
      await c.until(() =>
        c.frames.some((f) => f.type === T.HEADERS && f.stream === 5 && (f.flags & F.END_STREAM) !== 0),
      );
      assert.equal(c.goawayCode(), undefined);
    } finally {
      c.close();
    }
  });

  it('answers metadata over 64 KiB with RESOURCE_EXHAUSTED and keeps the connection', async () => {
    const c = open();
    try {
      c.write(
        frame(
          T.HEADERS,
          F.END_HEADERS,
          1,
          Buffer.concat([call('Echo'), hpack([['x-big', 'v'.repeat(70_000)]])]),
        ),
        frame(T.HEADERS, F.END_HEADERS, 3, call('Echo')),
        frame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.from('d'))),
      );
      await c.until(() =>
        c.frames.some((f) => f.type === T.HEADERS && f.stream === 3 && (f.flags & F.END_STREAM) !== 0),
      );
      const refused = c.frames.find((f) => f.type === T.HEADERS && f.stream === 1);
      assert.ok(refused !== undefined && (refused.flags & F.END_STREAM) !== 0);
      // The block is literal text: grpc-status 8 is in it.
      assert.match(refused.payload.toString('latin1'), /grpc-status.8/);
      assert.equal(c.goawayCode(), undefined);
    } finally {
      c.close();
    }
  });

  it('answers a PING with its payload and a SETTINGS with an ACK', async () => {
    const c = open();
    try {
      c.write(frame(T.PING, 0, 0, Buffer.from('12345678')));
      await c.until(() => c.frames.some((f) => f.type === T.PING));
      const ping = c.frames.find((f) => f.type === T.PING)!;
      assert.equal(ping.flags & F.ACK, F.ACK);
      assert.equal(ping.payload.toString(), '12345678');
      assert.ok(c.frames.some((f) => f.type === T.SETTINGS && (f.flags & F.ACK) !== 0));
    } finally {
      c.close();
    }
  });

  describe('the connection receive window (2 MiB, twice the stream window) is given back', () => {
    const connectionUpdates = (c: RawClient): Frame[] =>
      c.frames.filter((f) => f.type === T.WINDOW_UPDATE && f.stream === 0);
    /** The DATA payloads the server sent on `stream`, concatenated. */
    const collectData = (c: RawClient, stream: number): (() => Buffer) => {
      const parts: Buffer[] = [];
      c.onFrame = (f) => {
        if (f.type === T.DATA && f.stream === stream) parts.push(f.payload);
      };
      return () => Buffer.concat(parts);
    };
    const ended = (c: RawClient, stream: number) => () =>
      c.frames.some((f) => f.type === T.HEADERS && f.stream === stream && (f.flags & F.END_STREAM) !== 0);
    /** A PING's answer comes after every frame the server wrote before it. */
    const barrier = async (c: RawClient): Promise<void> => {
      const pings = c.frames.filter((f) => f.type === T.PING).length;
      c.write(frame(T.PING, 0, 0, Buffer.from('barrier!')));
      await c.until(() => c.frames.filter((f) => f.type === T.PING).length > pings, 5000, 'the PING answer');
    };
    const nextGate = (): Promise<Gate> =>
      new Promise((resolve) => {
        gated = resolve;
      });
    /** Opens a raw connection whose own windows let a 100,000-byte answer through at once. */
    const openWide = async (): Promise<RawClient> => {
      const c = open([[4, 1 << 20]]);
      c.write(frame(T.WINDOW_UPDATE, 0, 0, u32(1 << 20)));
      // The server's first update raises its window from 65,535 to 2 MiB.
      await c.until(() => connectionUpdates(c).length === 1, 5000, 'the initial WINDOW_UPDATE');
      assert.equal(connectionUpdates(c)[0]!.payload.readUInt32BE(0), 2 * 1024 * 1024 - 65_535);
      return c;
    };

    it('in front of the answer, whatever its kind, and not on its own for a message under half of it', async () => {
      const c = await openWide();
      try {
        const answers = [
          { stream: 1, answer: 'length', body: grpcMessage(u32(600_001)) },
          { stream: 3, answer: 'large', body: grpcMessage(Buffer.alloc(100_000, 3)) },
          { stream: 5, answer: 'error', body: Buffer.alloc(0) },
        ] as const;
        for (const { stream, answer, body } of answers) {
          const before = connectionUpdates(c).length;
          const data = collectData(c, stream);
          const reached = nextGate();
          const message = grpcMessage(Buffer.alloc(600_000 + stream, stream));
          c.write(
            frame(T.HEADERS, F.END_HEADERS, stream, call('Gated')),
            frame(T.DATA, F.END_STREAM, stream, message),
          );
          const gate = await reached;
          await barrier(c);
          assert.equal(connectionUpdates(c).length, before, 'no WINDOW_UPDATE while the call runs');
          gate.open(answer);
          await c.until(ended(c, stream), 5000, `the answer on stream ${stream}`);
          if (answer === 'length') assert.deepEqual(data(), grpcMessage(u32(message.byteLength - 5)));
          else assert.deepEqual(data(), body);
          const updates = connectionUpdates(c);
          assert.equal(updates.length, before + 1, `one update for the message on stream ${stream}`);
          const update = updates.at(-1)!;
          assert.equal(update.payload.readUInt32BE(0), message.byteLength);
          const head = c.frames.findIndex((f) => f.type === T.HEADERS && f.stream === stream);
          assert.equal(c.frames[head - 1], update, 'the update comes right before the answer');
        }
      } finally {
        c.close();
      }
    });

    it('on its own once half of it arrived unanswered, reset streams counted, so the client never runs dry', async () => {
      const c = await openWide();
      try {
        // Stream 1: a whole 600,005-byte message whose call waits.
        const reached = nextGate();
        c.write(
          frame(T.HEADERS, F.END_HEADERS, 1, call('Gated')),
          frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(600_000, 1))),
        );
        const gate = await reached;
        // Stream 3: 400,000 bytes of a longer message, then a reset from the client.
        const long = grpcMessage(Buffer.alloc(900_000, 3));
        c.write(
          frame(T.HEADERS, F.END_HEADERS, 3, call('Gated')),
          frame(T.DATA, 0, 3, long.subarray(0, 400_000)),
        );
        await barrier(c);
        assert.equal(connectionUpdates(c).length, 1, '1,000,005 bytes unanswered: under half of 2 MiB');
        c.write(frame(T.RST_STREAM, 0, 3, u32(E.CANCEL)));
        // Stream 5: 100,000 more bytes pass 1 MiB: the update goes out while both calls are open.
        c.write(
          frame(T.HEADERS, F.END_HEADERS, 5, call('Length')),
          frame(T.DATA, 0, 5, grpcMessage(Buffer.alloc(200_000, 5)).subarray(0, 100_000)),
        );
        await c.until(() => connectionUpdates(c).length === 2, 5000, 'a WINDOW_UPDATE of its own');
        assert.equal(connectionUpdates(c)[1]!.payload.readUInt32BE(0), 1_100_005);
        assert.ok(!ended(c, 1)() && !ended(c, 5)(), 'no answer has gone out yet');
        gate.open();
        await c.until(ended(c, 1), 5000, 'the answer on stream 1');
        assert.equal(connectionUpdates(c).length, 2, 'nothing was left to give back with the answer');
      } finally {
        c.close();
      }
    });
  });
});

async function waitFor(test: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('gRPC over our own HTTP/2: drain', () => {
  /** Answers of the Hold calls in progress: release() answers them all. */
  let holds: (() => void)[] = [];
  const release = (): void => {
    for (const answer of holds.splice(0)) answer();
  };
  let started: () => void = () => undefined;
  let aborted: unknown;
  const makeServer = (): Promise<RunningGrpcServer> =>
    startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      transport: 'lean',
      logger: createJsonLogger({ level: 'error', write: () => undefined }),
      services: [
        {
          name: 't.Svc',
          methods: {
            Hold: {
              handler: (_m, context) =>
                new Promise((resolve, reject) => {
                  holds.push(() => {
                    resolve([Buffer.from('done')]);
                  });
                  context.signal.addEventListener(
                    'abort',
                    () => {
                      aborted = context.signal.reason;
                      reject(context.signal.reason as Error);
                    },
                    { once: true },
                  );
                  started();
                }),
            },
          },
        },
      ],
    });

  function holdCall(port: number): {
    client: http2.ClientHttp2Session;
    result: Promise<{ status?: string; body: Buffer }>;
    goaway: Promise<void>;
  } {
    const client = http2.connect(`http://127.0.0.1:${port}`);
    client.on('error', () => undefined);
    const goaway = new Promise<void>((resolve) =>
      client.once('goaway', () => {
        resolve();
      }),
    );
    const result = new Promise<{ status?: string; body: Buffer }>((resolve) => {
      const stream = client.request({
        ':method': 'POST',
        ':path': '/t.Svc/Hold',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      const parts: Buffer[] = [];
      let status: string | undefined;
      stream.on('data', (c: Buffer) => parts.push(c));
      stream.on('trailers', (h: http2.IncomingHttpHeaders) => {
        status = String(h['grpc-status']);
      });
      stream.on('error', () => undefined);
      stream.on('close', () => {
        resolve({ ...(status === undefined ? {} : { status }), body: Buffer.concat(parts) });
      });
      stream.end(grpcMessage(Buffer.alloc(0)));
    });
    return { client, result, goaway };
  }

  it('close(graceMs) sends GOAWAY, lets the open call finish, then closes; new connections are refused', async () => {
    const server = await makeServer();
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { client, result, goaway } = holdCall(server.port);
    await running;
    const closed = server.close(10_000);
    await goaway;
    release();
    const answer = await result;
    assert.equal(answer.status, '0');
    assert.deepEqual(answer.body, grpcMessage(Buffer.from('done')));
    client.close();
    await closed;
    await assert.rejects(
      new Promise((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port: server.port });
        s.once('connect', () => {
          s.destroy();
          resolve(undefined);
        });
        s.once('error', reject);
      }),
    );
  });

  /** A server and a raw client whose stream 1 is a Hold call in progress. */
  async function holdOnRawClient(): Promise<{ server: RunningGrpcServer; c: RawClient }> {
    const server = await makeServer();
    holds = [];
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const c = new RawClient(server.port);
    c.write(PREFACE, settings([]));
    c.write(
      frame(T.HEADERS, F.END_HEADERS, 1, call('Hold')),
      frame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.alloc(0))),
    );
    await running;
    return { server, c };
  }

  it('drains in two steps: GOAWAY for every stream id and a PING, the final GOAWAY once the PING is answered; streams sent meanwhile are served, later ones refused without ending the connection', async () => {
    const { server, c } = await holdOnRawClient();
    const closed = server.close(10_000);
    await c.until(() => c.goawayCode() !== undefined, 5000, 'GOAWAY');
    assert.equal(c.goawayCode(), E.NO_ERROR);
    const lastIds = (): number[] =>
      c.frames.filter((f) => f.type === T.GOAWAY).map((f) => f.payload.readUInt32BE(0));
    assert.deepEqual(lastIds(), [0x7fffffff]);
    await c.until(
      () => c.frames.some((f) => f.type === T.PING && (f.flags & F.ACK) === 0),
      5000,
      'the drain PING',
    );
    const drainPing = c.frames.find((f) => f.type === T.PING && (f.flags & F.ACK) === 0)!;
    // A call the client sent before it read the GOAWAY (it has not answered the PING yet): served.
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    c.write(
      frame(T.HEADERS, F.END_HEADERS, 3, call('Hold')),
      frame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.alloc(0))),
    );
    await running;
    assert.equal(c.reset(3), undefined);
    assert.deepEqual(lastIds(), [0x7fffffff]);
    // The PING's answer: the final GOAWAY names stream 3.
    c.write(frame(T.PING, F.ACK, 0, drainPing.payload));
    await c.until(() => lastIds().length === 2, 5000, 'the final GOAWAY');
    assert.deepEqual(lastIds(), [0x7fffffff, 3]);
    // A stream after the final GOAWAY is refused; its DATA, WINDOW_UPDATE and RST_STREAM do not end the connection.
    c.write(
      frame(T.HEADERS, F.END_HEADERS, 5, call('Hold')),
      frame(T.DATA, 0, 5, grpcMessage(Buffer.alloc(3))),
      frame(T.WINDOW_UPDATE, 0, 5, u32(100)),
      frame(T.DATA, F.END_STREAM, 5, Buffer.alloc(0)),
      frame(T.RST_STREAM, 0, 5, u32(E.CANCEL)),
    );
    await c.until(() => c.reset(5) !== undefined, 5000, 'RST_STREAM on stream 5');
    assert.equal(c.reset(5), E.REFUSED_STREAM);
    // A PING round trip: every frame above has been processed.
    c.write(frame(T.PING, 0, 0, Buffer.alloc(8)));
    await c.until(() => c.frames.some((f) => f.type === T.PING && (f.flags & F.ACK) !== 0), 5000, 'PING ack');
    release();
    const trailersOf = (id: number): Frame | undefined =>
      c.frames.find((f) => f.type === T.HEADERS && f.stream === id && (f.flags & F.END_STREAM) !== 0);
    await c.until(() => trailersOf(1) !== undefined && trailersOf(3) !== undefined, 5000, 'the trailers');
    assert.match(trailersOf(1)!.payload.toString('latin1'), /grpc-status.0/);
    assert.match(trailersOf(3)!.payload.toString('latin1'), /grpc-status.0/);
    assert.deepEqual(
      c.frames.filter((f) => f.type === T.GOAWAY).map((f) => f.payload.readUInt32BE(4)),
      [E.NO_ERROR, E.NO_ERROR],
    );
    // The server ended its side; what the client sends now is read and dropped (no answer, no
    // reset), and the connection closes once the client closes its side.
    const pingAcks = (): number =>
      c.frames.filter((f) => f.type === T.PING && (f.flags & F.ACK) !== 0).length;
    const acksBefore = pingAcks();
    c.write(frame(T.PING, 0, 0, Buffer.alloc(8)), frame(T.WINDOW_UPDATE, 0, 0, u32(100)));
    await new Promise((resolve) => setTimeout(resolve, 50));
    c.socket.end();
    await closed;
    await c.until(() => c.closed, 5000, 'the socket closed');
    assert.equal(pingAcks(), acksBefore);
    assert.deepEqual(c.errors, []);
  });

  it('without an answer to the drain PING, the final GOAWAY follows within about a second', async () => {
    const { server, c } = await holdOnRawClient();
    const t0 = Date.now();
    const closed = server.close(10_000);
    const finals = (): Frame[] =>
      c.frames.filter((f) => f.type === T.GOAWAY && f.payload.readUInt32BE(0) === 1);
    await c.until(() => finals().length === 1, 5000, 'the final GOAWAY');
    const waited = Date.now() - t0;
    assert.ok(waited >= 900 && waited < 4000, `final GOAWAY after ${waited} ms`);
    release();
    await closed;
    c.close();
  });

  it('at the end of the grace period the connections are destroyed and open calls cancelled', async () => {
    const server = await makeServer();
    aborted = undefined;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { client, result } = holdCall(server.port);
    await running;
    const t0 = Date.now();
    await server.close(300);
    assert.ok(Date.now() - t0 < 5000);
    const answer = await result;
    assert.equal(answer.status, undefined);
    await waitFor(() => aborted !== undefined);
    assert.ok(aborted instanceof ServingError);
    client.destroy();
  });
});

describe('gRPC over our own HTTP/2: request bytes read straight into place (plain TCP)', () => {
  /** What one stream's reader saw: its room, bytes placed, bytes that came as views of it. */
  interface Seen {
    room: Buffer;
    fill: number;
    direct: number;
    overflow: number;
    ended: boolean;
  }
  const seen = new Map<string, Seen>();
  let listener: GrpcListener;

  before(async () => {
    listener = await startH2Listener({
      ...connectionGuardSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      // Raw clients here write whole messages without waiting for window (the admission
      // window has its own tests in grpc-h2-limits).
      admissionWindowBytes: 1 << 20,
      logger: createJsonLogger({ level: 'error', write: () => undefined }),
      windowBytes: 1 << 20,
      maxFrameBytes: 1 << 20,
      maxConcurrentStreams: 100,
      maxHeaderListBytes: 64 * 1024,
      maxConnections: 2,
      tls: undefined,
      onStream: (stream) => {
        // The method names the call and the size of its room (/t.Svc/<name>-<bytes>), as a
        // placed message would have it.
        const [name, bytes] = stream.headers[':path']!.split('/').pop()!.split('-');
        const size = Number(bytes);
        const s: Seen = { room: Buffer.alloc(size), fill: 0, direct: 0, overflow: 0, ended: false };
        seen.set(name!, s);
        stream.read(
          (chunk) => {
            if (chunk.buffer === s.room.buffer && chunk.byteOffset === s.room.byteOffset + s.fill) {
              s.direct += chunk.byteLength;
            } else {
              const take = Math.min(chunk.byteLength, size - s.fill);
              s.room.set(chunk.subarray(0, take), s.fill);
              s.overflow += chunk.byteLength - take;
              if (take < chunk.byteLength) {
                s.fill += take;
                return;
              }
            }
            s.fill += chunk.byteLength;
          },
          () => {
            s.ended = true;
            stream.respondStatus(Code.OK, '');
          },
          () => (s.fill < size ? s.room.subarray(s.fill) : undefined),
        );
      },
    });
  });

  after(async () => {
    await listener.close(1000);
  });

  const open = async (): Promise<RawClient> => {
    const c = new RawClient(listener.port);
    c.write(PREFACE, settings([]));
    await c.until(() => c.frames.some((f) => f.type === T.SETTINGS && (f.flags & F.ACK) === 0));
    return c;
  };
  const pause = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));
  /** Writes the bytes in pieces with pauses, so that the server reads parts of frames. */
  const trickle = async (c: RawClient, bytes: Buffer, piece: number): Promise<void> => {
    for (let at = 0; at < bytes.byteLength; at += piece) {
      c.write(bytes.subarray(at, at + piece));
      await pause();
    }
  };
  const ended = (c: RawClient, id: number, name: string): Promise<void> =>
    c.until(
      () =>
        seen.get(name)?.ended === true &&
        c.frames.some((f) => f.stream === id && (f.flags & F.END_STREAM) !== 0),
    );

  it('a 600 KB body in two DATA frames lands in its room, most of it read there directly', async () => {
    const c = await open();
    try {
      const body = randomBytes(600_000);
      c.write(frame(T.HEADERS, F.END_HEADERS, 1, call(`two-${body.byteLength}`)));
      const frames = Buffer.concat([
        frame(T.DATA, 0, 1, body.subarray(0, 440_000)),
        frame(T.DATA, F.END_STREAM, 1, body.subarray(440_000)),
      ]);
      await trickle(c, frames, 50_000);
      await ended(c, 1, 'two');
      const s = seen.get('two')!;
      assert.equal(s.fill, body.byteLength);
      assert.ok(s.room.equals(body), 'the room holds the body');
      assert.equal(s.overflow, 0);
      assert.ok(s.direct >= body.byteLength / 2, `only ${s.direct} bytes read straight into the room`);
    } finally {
      c.close();
    }
  });

  it('padding and the next frame header never land in the room (PADDED DATA frames)', async () => {
    const c = await open();
    try {
      // The room is larger than the body: padding or a frame header read into it would show
      // in its unused end, which must stay zero.
      const body = randomBytes(200_000);
      const padded = (data: Buffer, pad: number, flags: number): Buffer =>
        frame(
          T.DATA,
          F.PADDED | flags,
          1,
          Buffer.concat([Buffer.from([pad]), data, Buffer.alloc(pad, 0xee)]),
        );
      c.write(frame(T.HEADERS, F.END_HEADERS, 1, call(`padded-${body.byteLength + 50_000}`)));
      await trickle(
        c,
        Buffer.concat([
          padded(body.subarray(0, 120_000), 255, 0),
          padded(body.subarray(120_000), 17, F.END_STREAM),
        ]),
        30_000,
      );
      await ended(c, 1, 'padded');
      const s = seen.get('padded')!;
      assert.equal(s.fill, body.byteLength);
      assert.ok(s.room.subarray(0, body.byteLength).equals(body));
      assert.ok(
        s.room.subarray(body.byteLength).equals(Buffer.alloc(50_000)),
        'bytes past the data in the room',
      );
      assert.equal(s.overflow, 0);
      assert.ok(s.direct > 0, 'no byte was read straight into the room');
    } finally {
      c.close();
    }
  });

  it('interleaved streams each get only their own bytes', async () => {
    const c = await open();
    try {
      const a = randomBytes(300_000);
      const b = randomBytes(250_000);
      c.write(
        frame(T.HEADERS, F.END_HEADERS, 1, call(`a-${a.byteLength}`)),
        frame(T.HEADERS, F.END_HEADERS, 3, call(`b-${b.byteLength}`)),
      );
      const frames = Buffer.concat([
        frame(T.DATA, 0, 1, a.subarray(0, 100_000)),
        frame(T.DATA, 0, 3, b.subarray(0, 100_000)),
        frame(T.DATA, 0, 1, a.subarray(100_000, 200_000)),
        frame(T.DATA, F.END_STREAM, 3, b.subarray(100_000)),
        frame(T.DATA, F.END_STREAM, 1, a.subarray(200_000)),
      ]);
      await trickle(c, frames, 40_000);
      await ended(c, 1, 'a');
      await ended(c, 3, 'b');
      assert.ok(seen.get('a')!.room.equals(a));
      assert.ok(seen.get('b')!.room.equals(b));
      assert.ok(seen.get('a')!.direct > 0 && seen.get('b')!.direct > 0);
    } finally {
      c.close();
    }
  });

  it('bytes past the room are not read into it: they reach the reader as ordinary chunks', async () => {
    const c = await open();
    try {
      const body = randomBytes(150_000);
      c.write(frame(T.HEADERS, F.END_HEADERS, 1, call('over-100000')));
      await trickle(c, frame(T.DATA, F.END_STREAM, 1, body), 20_000);
      await ended(c, 1, 'over');
      const s = seen.get('over')!;
      assert.ok(s.room.equals(body.subarray(0, 100_000)));
      assert.equal(s.overflow, 50_000);
    } finally {
      c.close();
    }
  });

  it('a connection past maxConnections takes the place of the longest idle one (GOAWAY); with a call open on every one it is closed at once', async () => {
    const first = await open();
    const second = await open();
    const third = await open();
    let fourth: RawClient | undefined;
    try {
      await first.until(
        () => first.frames.some((f) => f.type === T.GOAWAY),
        5000,
        'GOAWAY on the evicted one',
      );
      await first.until(() => first.closed, 5000, 'the evicted connection closing');
      // A call open on each connection: none is idle, so a new one is refused.
      second.write(frame(T.HEADERS, F.END_HEADERS, 1, call('held-10')));
      third.write(frame(T.HEADERS, F.END_HEADERS, 1, call('kept-10')));
      await waitFor(() => seen.has('held') && seen.has('kept'));
      fourth = new RawClient(listener.port);
      fourth.write(PREFACE, settings([]));
      await fourth.until(() => fourth!.closed, 5000, 'the fourth connection closing');
      assert.equal(fourth.frames.length, 0);
      // Once a call ends its connection is idle, and gives its place to the next.
      second.write(frame(T.DATA, F.END_STREAM, 1, Buffer.alloc(10)));
      await ended(second, 1, 'held');
      const fifth = await open();
      fifth.close();
      await second.until(() => second.closed, 5000, 'the connection idle again closing');
      assert.equal(third.closed, false, 'the connection with a call open stays');
    } finally {
      for (const c of [first, second, third, fourth]) c?.close();
    }
  });
});

describe('gRPC over our own HTTP/2: a message read partly in place, partly copied, arrives whole', () => {
  let server: RunningGrpcServer;

  before(async () => {
    server = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      // Raw clients here write whole messages without waiting for window (the admission
      // window has its own tests in grpc-h2-limits).
      admissionWindowBytes: 1 << 20,
      transport: 'lean',
      logger: createJsonLogger({ level: 'error', write: () => undefined }),
      services: [
        {
          name: 't.Svc',
          methods: {
            Hash: { handler: (message) => Promise.resolve([createHash('sha256').update(message).digest()]) },
          },
        },
      ],
    });
  });

  after(async () => {
    await server.close(500);
  });

  it('random 600 KB: a head in tiny frames and separate reads, then large frames; the handler sees every byte', async () => {
    const c = new RawClient(server.port);
    const answer: Buffer[] = [];
    c.onFrame = (f) => {
      if (f.type === T.DATA && f.stream === 1) answer.push(f.payload);
    };
    try {
      const body = randomBytes(600_000);
      const message = grpcMessage(body);
      c.write(PREFACE, settings([]), frame(T.HEADERS, F.END_HEADERS, 1, call('Hash')));
      // The head (under the 1 KB the server looks at before placing the message) in pieces
      // that arrive in separate reads, then frames large enough to be read into place.
      const cuts = [1, 4, 10, 300, 900, 440_000, message.byteLength];
      let at = 0;
      for (const [i, cut] of cuts.entries()) {
        const last = i === cuts.length - 1;
        const piece = frame(T.DATA, last ? F.END_STREAM : 0, 1, message.subarray(at, cut));
        for (let p = 0; p < piece.byteLength; p += 60_000) {
          c.write(piece.subarray(p, p + 60_000));
          await new Promise((resolve) => setTimeout(resolve, 3));
        }
        at = cut;
      }
      await c.until(() => c.frames.some((f) => f.stream === 1 && (f.flags & F.END_STREAM) !== 0));
      const got = Buffer.concat(answer);
      assert.equal(got.byteLength, 5 + 32);
      assert.ok(
        got.subarray(5).equals(createHash('sha256').update(body).digest()),
        'the handler saw other bytes',
      );
    } finally {
      c.close();
    }
  });
});
