/**
 * The lean channel against a server that sheds load the way visionserve's does: it answers a
 * call trailers-only (UNAVAILABLE) at the message head while the client still sends the rest,
 * under a SETTINGS_MAX_CONCURRENT_STREAMS of 1. The stream counts against the limit until the
 * client's RST_STREAM (or END_STREAM) arrives, so a HEADERS ahead of that reset exceeds the
 * limit (RFC 9113 §5.1.2). It did: the overload bench's server refused such streams and counted
 * them toward its ENHANCE_YOUR_CALM flood limit.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import {
  ErrorCode,
  Flag,
  FrameReader,
  FrameType,
  Setting,
  encodeFrame,
  encodeHeaderBlock,
  encodeSettings,
  encodeUint32Frame,
} from '@visionserve/h2';
import { Code, ServingError, createGrpcChannel } from '../src/index.js';

const SHED = encodeHeaderBlock([
  [':status', '200'],
  ['content-type', 'application/grpc'],
  ['grpc-status', String(Code.UNAVAILABLE)],
  ['grpc-message', 'Queue is full'],
]);

interface Counts {
  opened: number;
  overLimit: number;
}

/** A raw HTTP/2 server: limit 1 stream, 64 KiB windows, every call shed at its HEADERS. */
function shedServer(counts: Counts, sockets: Set<net.Socket>): net.Server {
  return net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const open = new Set<number>();
    let prefaceLeft = 24;
    let dataStream = 0;
    socket.write(encodeSettings([[Setting.MAX_CONCURRENT_STREAMS, 1]]));
    const reader = new FrameReader(
      {
        onFrame(type, flags, streamId) {
          if (type === FrameType.SETTINGS && (flags & Flag.ACK) === 0)
            socket.write(encodeFrame(FrameType.SETTINGS, Flag.ACK, 0));
          if (type === FrameType.RST_STREAM) open.delete(streamId);
          if (type !== FrameType.HEADERS) return;
          counts.opened++;
          if (open.size >= 1) {
            counts.overLimit++;
            socket.write(encodeUint32Frame(FrameType.RST_STREAM, streamId, ErrorCode.REFUSED_STREAM));
            return;
          }
          if ((flags & Flag.END_STREAM) === 0) open.add(streamId);
          socket.write(encodeFrame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, streamId, SHED));
        },
        onDataStart(streamId, _flags, length) {
          dataStream = streamId;
          // The connection window goes back (the body is read and dropped); the stream's does not.
          if (length > 0) socket.write(encodeUint32Frame(FrameType.WINDOW_UPDATE, 0, length));
        },
        onData() {
          // dropped
        },
        onDataEnd(flags) {
          if ((flags & Flag.END_STREAM) !== 0) open.delete(dataStream);
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
}

describe('lean channel, calls answered while their request is still being sent', () => {
  const counts: Counts = { opened: 0, overLimit: 0 };
  const sockets = new Set<net.Socket>();
  const server = shedServer(counts, sockets);
  let address = '';
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('32 concurrent 600 KB calls over a limit of 1 stream: each reset reaches the server before the next HEADERS', async () => {
    const channel = createGrpcChannel({ address, transport: 'lean' });
    const body = new Uint8Array(600 * 1024);
    try {
      // One call first: the 32 start once the server's SETTINGS (the limit) have arrived.
      await assert.rejects(channel.unary('/x/y', body, { timeoutMs: 20_000 }), /Queue is full/);
      const outcomes = await Promise.allSettled(
        Array.from({ length: 32 }, () => channel.unary('/x/y', body, { timeoutMs: 20_000 })),
      );
      for (const o of outcomes) {
        assert.equal(o.status, 'rejected');
        const e = o.reason as unknown;
        assert.ok(e instanceof ServingError, String(e));
        assert.equal(e.code, Code.UNAVAILABLE, e.message);
        assert.match(e.message, /Queue is full/);
      }
    } finally {
      channel.close();
    }
    assert.equal(counts.overLimit, 0, `${counts.overLimit} of ${counts.opened} streams over the limit`);
    assert.equal(counts.opened, 33);
  });
});
