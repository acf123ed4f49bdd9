/**
 * writeTlsBatchesWithoutCopy (listener-tls.ts): a TLS socket's corked batches, written as
 * joined runs of small buffers and large buffers on their own, arrive byte for byte and in
 * order over a real TLS connection; a peer that goes away mid-batch fails the write, and
 * nothing throws.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import tls, { type TLSSocket } from 'node:tls';
import { writeTlsBatchesWithoutCopy } from '../src/frontends/shared/listener-tls.js';

let dir: string;
let key: Buffer;
let cert: Buffer;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vs-tls-writes-'));
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost'].concat([
      '-addext',
      'subjectAltName=DNS:localhost',
      '-keyout',
      'key.pem',
      '-out',
      'cert.pem',
    ]),
    { cwd: dir, stdio: 'ignore' },
  );
  key = await readFile(join(dir, 'key.pem'));
  cert = await readFile(join(dir, 'cert.pem'));
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Sizes of the single writes the batching made, per connection in order. */
let singleWrites: number[] = [];

/** A TLS server that hands each connection to `onSocket` with the batching installed. */
async function serve(onSocket: (socket: TLSSocket) => void): Promise<{ port: number; close: () => void }> {
  const server = tls.createServer({ key, cert }, (socket) => {
    const own = socket as unknown as { _write: (chunk: Uint8Array, ...rest: unknown[]) => void };
    const write = own._write.bind(socket);
    own._write = (chunk, ...rest) => {
      singleWrites.push(chunk.byteLength);
      write(chunk, ...rest);
    };
    writeTlsBatchesWithoutCopy(socket);
    socket.on('error', () => undefined);
    onSocket(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, close: () => server.close() };
}

/** Everything the server sends on one connection until it ends it. */
function receiveAll(port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const socket = tls.connect({ host: '127.0.0.1', port, ca: cert, servername: 'localhost' });
    socket.on('data', (chunk: Buffer) => {
      parts.push(chunk);
    });
    socket.on('end', () => {
      resolve(Buffer.concat(parts));
    });
    socket.on('error', reject);
  });
}

function random(n: number): Uint8Array {
  return randomFillSync(new Uint8Array(n));
}

describe('TLS listener writes', () => {
  it('sends corked batches of small and large buffers byte for byte, in order', async () => {
    const big = random(3 * 1024 * 1024 + 5);
    // What an answer looks like (frame headers, views of one large tensor at odd offsets,
    // trailers), plus a string chunk as node:http writes its head.
    const batch: (Uint8Array | string)[] = [
      random(9),
      big.subarray(0, 64 * 1024),
      random(9),
      big.subarray(64 * 1024, 64 * 1024 + 1),
      random(9),
      big.subarray(64 * 1024 + 1, 2 * 1024 * 1024 + 3),
      'HTTP/1.1 200 OK\r\n',
      random(100),
      big.subarray(2 * 1024 * 1024 + 3),
      random(30),
    ];
    const second = [random(5), random(200 * 1024), random(7)];
    const expected = Buffer.concat(
      [...batch, ...second].map((c) => (typeof c === 'string' ? Buffer.from(c, 'latin1') : c)),
    );
    let written = 0;
    singleWrites = [];
    const server = await serve((socket) => {
      socket.cork();
      for (const chunk of batch) socket.write(chunk, () => (written += 1));
      socket.uncork();
      // A second batch queued while the first may still be going out.
      socket.cork();
      for (const chunk of second) socket.write(chunk, () => (written += 1));
      socket.uncork();
      socket.end();
    });
    try {
      const received = await receiveAll(server.port);
      assert.equal(received.length, expected.length);
      assert.ok(received.equals(expected), 'bytes differ');
      assert.equal(written, batch.length + second.length, 'every write called back');
      // Large buffers went out on their own, runs of small ones joined: no batch was copied whole.
      assert.deepEqual(singleWrites, [
        9,
        64 * 1024,
        19,
        2 * 1024 * 1024 + 2 - 64 * 1024,
        117,
        1024 * 1024 + 2,
        30,
        5,
        200 * 1024,
        7,
      ]);
    } finally {
      server.close();
    }
  });

  it('a peer that goes away in the middle of a large batch fails the writes without throwing', async () => {
    const big = random(32 * 1024 * 1024);
    let failure: unknown;
    let closed!: () => void;
    const serverClosed = new Promise<void>((resolve) => (closed = resolve));
    const server = await serve((socket) => {
      socket.on('close', closed);
      socket.cork();
      for (let at = 0; at < big.length; at += 1024 * 1024) {
        socket.write(random(9));
        socket.write(big.subarray(at, at + 1024 * 1024), (error) => {
          failure ??= error;
        });
      }
      socket.uncork();
    });
    try {
      await new Promise<void>((resolve, reject) => {
        const socket = tls.connect({
          host: '127.0.0.1',
          port: server.port,
          ca: cert,
          servername: 'localhost',
        });
        socket.once('data', () => {
          socket.destroy();
          resolve();
        });
        socket.on('error', reject);
      });
      await serverClosed;
      assert.ok(failure instanceof Error, `the pending writes failed: ${String(failure)}`);
    } finally {
      server.close();
    }
  });
});
