/**
 * The :scheme and :authority both gRPC channels send, from the address they were given: a
 * node:http2 server records the request headers and answers an empty OK message.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { createGrpcChannel } from '../src/index.js';

/** Serves one empty gRPC answer per call on `host`, recording each call's :scheme and :authority. */
async function recordingServer(host: string): Promise<{
  server: http2.Http2Server;
  port: number;
  seen: { scheme: string; authority: string }[];
}> {
  const seen: { scheme: string; authority: string }[] = [];
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    seen.push({ scheme: String(headers[':scheme']), authority: String(headers[':authority']) });
    stream.on('data', () => undefined);
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => {
        stream.sendTrailers({ 'grpc-status': '0' });
      });
      stream.end(Buffer.alloc(5));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return { server, port: (server.address() as AddressInfo).port, seen };
}

/** Whether this machine can listen on the IPv6 loopback. */
async function ipv6Loopback(): Promise<boolean> {
  try {
    const { server } = await recordingServer('::1');
    server.close();
    return true;
  } catch {
    return false;
  }
}

describe('gRPC channels: :scheme and :authority', () => {
  let v4: Awaited<ReturnType<typeof recordingServer>>;
  before(async () => {
    v4 = await recordingServer('127.0.0.1');
  });
  after(() => v4.server.close());

  for (const transport of ['lean', 'node'] as const) {
    it(`${transport}: host:port and http:// addresses send http and host:port`, async () => {
      for (const address of [`127.0.0.1:${v4.port}`, `http://127.0.0.1:${v4.port}`]) {
        v4.seen.length = 0;
        const channel = createGrpcChannel({ address, transport });
        try {
          await channel.unary('/x.Y/Z', new Uint8Array(0));
        } finally {
          channel.close();
        }
        assert.deepEqual(v4.seen, [{ scheme: 'http', authority: `127.0.0.1:${v4.port}` }], address);
      }
    });
  }

  it('lean: an IPv6 address keeps its brackets in :authority', async (t) => {
    if (!(await ipv6Loopback())) {
      t.skip('no IPv6 loopback on this machine');
      return;
    }
    const v6 = await recordingServer('::1');
    try {
      const channel = createGrpcChannel({ address: `[::1]:${v6.port}`, transport: 'lean' });
      try {
        await channel.unary('/x.Y/Z', new Uint8Array(0));
      } finally {
        channel.close();
      }
      assert.deepEqual(v6.seen, [{ scheme: 'http', authority: `[::1]:${v6.port}` }]);
    } finally {
      v6.server.close();
    }
  });
});
