/**
 * The client's own HTTP/2 gRPC channel (transport 'lean') against a scripted raw-socket
 * server: well-formed answers in odd shapes (CONTINUATION, padding, tiny frames, trailers-only
 * errors), resets, GOAWAY, and hostile bytes (oversized frames, broken HPACK, DATA beyond the
 * window, frames on streams never opened, PUSH_PROMISE, a connection cut mid-message). Each
 * must end the call with a clear ServingError, never an exception out of a socket callback,
 * and the channel must serve the next call on a new connection.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import {
  ErrorCode,
  Flag,
  FrameReader,
  FrameType,
  encodeFrame,
  encodeGoaway,
  encodeHeaderBlock,
  encodeSettings,
  encodeUint32Frame,
  Setting,
} from '@visionserve/h2';
import { Code, ServingError, createGrpcChannel } from '../src/index.js';
import { createH2GrpcChannel } from '../src/h2-grpc-channel.js';

/** What the server does once a request (stream `id`) has fully arrived. */
type Script = (socket: net.Socket, id: number) => void;

const headers = (fields: readonly (readonly [string, string])[]): Uint8Array => encodeHeaderBlock(fields);
const RESPONSE = headers([
  [':status', '200'],
  ['content-type', 'application/grpc'],
]);
const OK_TRAILERS = headers([['grpc-status', '0']]);

/** A length-prefixed gRPC message. */
function framed(message: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + message.byteLength);
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

/** DATA frames of at most `size` bytes carrying `bytes`, END_STREAM on none. */
function dataFrames(id: number, bytes: Uint8Array, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.byteLength; at += size)
    out.push(encodeFrame(FrameType.DATA, 0, id, bytes.subarray(at, at + size)));
  return out;
}

const isCode =
  (code: Code, pattern?: RegExp) =>
  (e: unknown): boolean => {
    assert.ok(e instanceof ServingError, `not a ServingError: ${String(e)}`);
    assert.equal(e.code, code, `${Code[e.code]}: ${e.message}`);
    if (pattern) assert.match(e.message, pattern);
    return true;
  };

describe('lean gRPC channel against a scripted HTTP/2 server', () => {
  let server: net.Server;
  let address: string;
  let script: Script = () => undefined;
  /** Streams the client reset (RST_STREAM), in order. */
  const resets: number[] = [];
  const sockets = new Set<net.Socket>();

  before(async () => {
    server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
      let prefaceLeft = 24;
      let dataStream = 0;
      socket.write(encodeSettings([[Setting.MAX_FRAME_SIZE, 16_384]]));
      const reader = new FrameReader(
        {
          onFrame(type, flags, streamId) {
            if (type === FrameType.RST_STREAM) resets.push(streamId);
            if (type === FrameType.SETTINGS && (flags & Flag.ACK) === 0)
              socket.write(encodeFrame(FrameType.SETTINGS, Flag.ACK, 0));
            if (type === FrameType.HEADERS && (flags & Flag.END_STREAM) !== 0) script(socket, streamId);
          },
          onDataStart(streamId) {
            dataStream = streamId;
          },
          onData() {
            // the request body is not needed
          },
          onDataEnd(flags) {
            if ((flags & Flag.END_STREAM) !== 0) script(socket, dataStream);
          },
          onFrameError() {
            socket.destroy();
          },
        },
        1 << 24,
        1 << 20,
      );
      socket.on('data', (chunk: Buffer) => {
        let at = 0;
        if (prefaceLeft > 0) {
          at = Math.min(prefaceLeft, chunk.byteLength);
          prefaceLeft -= at;
        }
        if (at < chunk.byteLength) reader.push(chunk.subarray(at));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  /** Runs one call with `s` scripted; the request is empty so that HEADERS carry END_STREAM. */
  const call = async (s: Script, options: { timeoutMs?: number; signal?: AbortSignal } = {}) => {
    script = s;
    const channel = createGrpcChannel({ address, transport: 'lean' });
    try {
      return await channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 5000, ...options });
    } finally {
      channel.close();
    }
  };

  it('assembles a message from tiny DATA frames, padded frames and a CONTINUATION-split header block', async () => {
    const message = new Uint8Array(50_000).map((_, i) => (i * 13) & 0xff);
    const got = await call((socket, id) => {
      const block = Buffer.from(RESPONSE);
      socket.write(encodeFrame(FrameType.HEADERS, 0, id, block.subarray(0, 2)));
      socket.write(encodeFrame(FrameType.CONTINUATION, Flag.END_HEADERS, id, block.subarray(2)));
      const bytes = framed(message);
      // A padded frame: pad length 3, 10 data bytes, 3 padding bytes.
      socket.write(
        encodeFrame(
          FrameType.DATA,
          Flag.PADDED,
          id,
          Buffer.concat([Buffer.of(3), bytes.subarray(0, 10), Buffer.alloc(3)]),
        ),
      );
      for (const f of dataFrames(id, bytes.subarray(10, 1000), 7)) socket.write(f);
      for (const f of dataFrames(id, bytes.subarray(1000), 16_384)) socket.write(f);
      socket.write(encodeFrame(FrameType.PING, 0, 0, Buffer.alloc(8)));
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, id, OK_TRAILERS));
    });
    assert.deepEqual(Buffer.from(got), Buffer.from(message));
  });

  it('ends the connection on a flood of empty CONTINUATION frames or PINGs, memory bounded', async () => {
    await assert.rejects(
      call((socket, id) => {
        socket.write(encodeFrame(FrameType.HEADERS, 0, id, Buffer.from(RESPONSE).subarray(0, 1)));
        const empty = encodeFrame(FrameType.CONTINUATION, 0, id, Buffer.alloc(0));
        for (let i = 0; i < 10_000 && !socket.destroyed; i++) socket.write(empty);
      }),
      isCode(Code.INTERNAL, /CONTINUATION/),
    );
    await assert.rejects(
      call((socket) => {
        const ping = encodeFrame(FrameType.PING, 0, 0, Buffer.alloc(8));
        for (let i = 0; i < 5_000 && !socket.destroyed; i++) socket.write(ping);
      }),
      isCode(Code.INTERNAL, /control frames/),
    );
  });

  it('sends a call again on a new connection when the server refused it (REFUSED_STREAM), once', async () => {
    let streams = 0;
    const got = await call((socket, id) => {
      if (++streams === 1) {
        socket.write(encodeUint32Frame(FrameType.RST_STREAM, id, ErrorCode.REFUSED_STREAM));
        return;
      }
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
      socket.write(encodeFrame(FrameType.DATA, 0, id, framed(Buffer.from('ok'))));
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, id, OK_TRAILERS));
    });
    assert.equal(Buffer.from(got).toString(), 'ok');
    assert.equal(streams, 2);
    streams = -100; // refuse every time: the second refusal is the answer
    await assert.rejects(
      call((socket, id) => {
        socket.write(encodeUint32Frame(FrameType.RST_STREAM, id, ErrorCode.REFUSED_STREAM));
      }),
      isCode(Code.UNAVAILABLE, /refused/),
    );
  });

  it('reports a trailers-only error status with its decoded message', async () => {
    await assert.rejects(
      call((socket, id) => {
        const block = headers([
          [':status', '200'],
          ['content-type', 'application/grpc'],
          ['grpc-status', '5'],
          ['grpc-message', 'no%20such%20model'],
        ]);
        socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, id, block));
      }),
      isCode(Code.NOT_FOUND, /^no such model$/),
    );
  });

  it('maps a non-200 HTTP status, a response without status and RST_STREAM codes', async () => {
    await assert.rejects(
      call((socket, id) => {
        socket.write(
          encodeFrame(
            FrameType.HEADERS,
            Flag.END_HEADERS | Flag.END_STREAM,
            id,
            headers([[':status', '503']]),
          ),
        );
      }),
      isCode(Code.UNAVAILABLE, /HTTP status 503/),
    );
    await assert.rejects(
      call((socket, id) => {
        socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
        socket.write(encodeFrame(FrameType.DATA, Flag.END_STREAM, id, framed(Uint8Array.of(1))));
      }),
      isCode(Code.INTERNAL, /without a gRPC status/),
    );
    for (const [reset, code] of [
      [ErrorCode.REFUSED_STREAM, Code.UNAVAILABLE],
      [ErrorCode.CANCEL, Code.CANCELLED],
      [ErrorCode.ENHANCE_YOUR_CALM, Code.RESOURCE_EXHAUSTED],
      [ErrorCode.INTERNAL_ERROR, Code.INTERNAL],
    ] as const) {
      await assert.rejects(
        call((socket, id) => {
          socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
          socket.write(dataFrames(id, framed(new Uint8Array(100)), 50)[0]!);
          socket.write(encodeUint32Frame(FrameType.RST_STREAM, id, reset));
        }),
        isCode(code, /reset by the server/),
      );
    }
  });

  it('fails a call past GOAWAY UNAVAILABLE and opens a new connection for the next one', async () => {
    script = (socket) => {
      socket.write(encodeGoaway(0, ErrorCode.NO_ERROR));
    };
    const channel = createGrpcChannel({ address, transport: 'lean' });
    await assert.rejects(
      channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 5000 }),
      isCode(Code.UNAVAILABLE, /going away/),
    );
    script = (socket, id) => {
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
      socket.write(encodeFrame(FrameType.DATA, 0, id, framed(Uint8Array.of(9))));
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, id, OK_TRAILERS));
    };
    assert.deepEqual([...(await channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 5000 }))], [9]);
    channel.close();
  });

  it('ends the connection with INTERNAL on hostile frames', async () => {
    const hostile: [string, Script, RegExp][] = [
      [
        'a frame over the advertised SETTINGS_MAX_FRAME_SIZE',
        (socket, id) => {
          socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
          const head = Buffer.alloc(9);
          head.writeUIntBE(2 ** 24 - 1, 0, 3);
          head[3] = FrameType.DATA;
          head.writeUInt32BE(id, 5);
          socket.write(head);
        },
        /Frame of/,
      ],
      [
        'a header block that is not HPACK',
        (socket, id) => {
          socket.write(
            encodeFrame(
              FrameType.HEADERS,
              Flag.END_HEADERS,
              id,
              Buffer.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
            ),
          );
        },
        /header block/i,
      ],
      [
        'DATA on a stream never opened',
        (socket) => {
          socket.write(encodeFrame(FrameType.DATA, 0, 99, Buffer.alloc(10)));
        },
        /never opened/,
      ],
      [
        'PUSH_PROMISE',
        (socket, id) => {
          socket.write(encodeFrame(FrameType.PUSH_PROMISE, Flag.END_HEADERS, id, Buffer.alloc(4)));
        },
        /PUSH_PROMISE/,
      ],
      [
        'SETTINGS of a bad length',
        (socket) => {
          socket.write(encodeFrame(FrameType.SETTINGS, 0, 0, Buffer.alloc(5)));
        },
        /SETTINGS/,
      ],
      [
        'a CONTINUATION without a header block',
        (socket, id) => {
          socket.write(encodeFrame(FrameType.CONTINUATION, Flag.END_HEADERS, id, RESPONSE));
        },
        /CONTINUATION/,
      ],
      [
        'DATA before the response headers',
        (socket, id) => {
          socket.write(encodeFrame(FrameType.DATA, 0, id, framed(Uint8Array.of(1))));
        },
        /before response headers/,
      ],
      [
        'DATA inside a header block (HEADERS without END_HEADERS)',
        (socket, id) => {
          socket.write(encodeFrame(FrameType.HEADERS, 0, id, RESPONSE));
          socket.write(encodeFrame(FrameType.DATA, 0, id, framed(Uint8Array.of(1))));
        },
        /DATA inside a header block/,
      ],
      [
        'SETTINGS_INITIAL_WINDOW_SIZE that takes an open stream window past 2^31-1',
        (socket, id) => {
          socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, id, 2 ** 31 - 1 - 65_535));
          socket.write(encodeSettings([[Setting.INITIAL_WINDOW_SIZE, 65_535 + 10]]));
        },
        /Stream window past 2\^31-1/,
      ],
    ];
    for (const [what, s, pattern] of hostile) {
      await assert.rejects(call(s), (e: unknown) => {
        assert.ok(e instanceof ServingError, `${what}: ${String(e)}`);
        assert.equal(e.code, Code.INTERNAL, `${what}: ${Code[e.code]} ${e.message}`);
        assert.match(e.message, pattern, what);
        return true;
      });
    }
  });

  it('ends the connection with INTERNAL on DATA beyond the receive window', async () => {
    script = (socket, id) => {
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
      // One frame larger than the 65,535-byte window (within the 1 MiB frame size advertised).
      socket.write(encodeFrame(FrameType.DATA, 0, id, framed(new Uint8Array(100_000))));
    };
    const channel = createH2GrpcChannel({ address, windowBytes: 65_535 });
    await assert.rejects(
      channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 5000 }),
      isCode(Code.INTERNAL, /beyond the connection window/),
    );
    channel.close();
  });

  it('fails UNAVAILABLE when the connection is cut mid-message, and on a refused connection', async () => {
    await assert.rejects(
      call((socket, id) => {
        socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
        socket.write(dataFrames(id, framed(new Uint8Array(100_000)), 16_384)[0]!, () => socket.destroy());
      }),
      isCode(Code.UNAVAILABLE),
    );
    const channel = createGrpcChannel({ address: '127.0.0.1:1', transport: 'lean' });
    await assert.rejects(
      channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 5000 }),
      isCode(Code.UNAVAILABLE),
    );
    channel.close();
    // https:// is a TLS address now, not a refused one: a refused connection is UNAVAILABLE
    // (tls.integration.test.ts tests TLS itself).
    const refusedTls = createGrpcChannel({ address: 'https://127.0.0.1:1', transport: 'lean' });
    await assert.rejects(refusedTls.unary('/x/y', new Uint8Array(0)), isCode(Code.UNAVAILABLE));
    refusedTls.close();
    // A bad address is a configuration mistake: refused when the channel is made, on both transports.
    for (const transport of ['lean', 'node'] as const) {
      assert.throws(
        () => createGrpcChannel({ address: 'ftp://127.0.0.1:1', transport }),
        isCode(Code.INVALID_ARGUMENT),
      );
      assert.throws(
        () => createGrpcChannel({ address: 'http://[::1', transport }),
        isCode(Code.INVALID_ARGUMENT),
      );
    }
  });

  it('deadline and cancellation reset a stream mid-message; the connection serves the next call', async () => {
    const channel = createGrpcChannel({ address, transport: 'lean' });
    resets.length = 0;
    script = (socket, id) => {
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
      socket.write(dataFrames(id, framed(new Uint8Array(100_000)), 16_384)[0]!);
    };
    const t0 = performance.now();
    await assert.rejects(
      channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 200 }),
      isCode(Code.DEADLINE_EXCEEDED),
    );
    assert.ok(performance.now() - t0 < 3000);
    const controller = new AbortController();
    const pending = channel.unary('/x/y', new Uint8Array(0), { signal: controller.signal });
    setTimeout(() => {
      controller.abort();
    }, 50);
    await assert.rejects(pending, isCode(Code.CANCELLED));
    // Late DATA for the reset streams is dropped; the connection still answers.
    script = (socket, id) => {
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, id, RESPONSE));
      socket.write(encodeFrame(FrameType.DATA, 0, id, framed(Uint8Array.of(7, 8))));
      socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, id, OK_TRAILERS));
    };
    assert.deepEqual([...(await channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 5000 }))], [7, 8]);
    assert.deepEqual(resets, [1, 3]);
    channel.close();
  });
});

describe('lean gRPC channel against a server that never speaks HTTP/2', () => {
  it('fails a call without a deadline UNAVAILABLE once the handshake time is over', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const channel = createH2GrpcChannel({
      address: `127.0.0.1:${(silent.address() as AddressInfo).port}`,
      handshakeTimeoutMs: 200,
    });
    try {
      const started = Date.now();
      await assert.rejects(channel.unary('/x/y', new Uint8Array(0)), isCode(Code.UNAVAILABLE, /SETTINGS/));
      assert.ok(Date.now() - started >= 150, `failed after ${Date.now() - started} ms`);
    } finally {
      channel.close();
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
