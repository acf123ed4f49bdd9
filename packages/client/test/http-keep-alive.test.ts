import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ServingError } from '../src/index.js';
import { createHttpTransport, idleSocketTimeout } from '../src/http-transport.js';

/**
 * A node:http server in a child process (its own event loop, so that this process can block
 * its own while the server acts). Each answer is `{"conn": <connection number>, "bytes": <body
 * bytes>}`. A line "close" on its stdin closes every idle keep-alive connection and then
 * creates the file `<dir>/closed-<n>` (n counts the closes).
 */
const SERVER = `
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const [keepAliveMs, dir] = process.argv.slice(1);
let conns = 0;
let closes = 0;
const server = http.createServer((req, res) => {
  let bytes = 0;
  req.on('data', (c) => (bytes += c.length));
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ conn: req.socket.conn, bytes }));
  });
});
server.keepAliveTimeout = Number(keepAliveMs);
server.on('connection', (s) => (s.conn = ++conns));
process.stdin.setEncoding('utf8');
process.stdin.on('data', (text) => {
  for (const line of text.split('\\n')) {
    if (line !== 'close') continue;
    server.closeIdleConnections();
    setImmediate(() => fs.writeFileSync(path.join(dir, 'closed-' + ++closes), ''));
  }
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

interface StubServer {
  readonly base: string;
  /** Closes the server's idle connections and blocks this thread until it has. */
  closeIdleBlocking(): void;
  stop(): void;
}

async function startStubServer(keepAliveMs: number): Promise<StubServer> {
  const dir = mkdtempSync(join(tmpdir(), 'vs-keepalive-'));
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ['-e', SERVER, String(keepAliveMs), dir],
    { stdio: 'pipe' },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.stdout.once('data', (d: Buffer) => {
      resolve(Number(String(d).trim()));
    });
  });
  let closes = 0;
  return {
    base: `http://127.0.0.1:${port}`,
    closeIdleBlocking() {
      const marker = join(dir, `closed-${++closes}`);
      child.stdin.write('close\n');
      // Synchronously: this event loop must not run (and see the server's FIN) before the next request.
      const until = Date.now() + 10_000;
      while (!existsSync(marker)) {
        if (Date.now() > until) throw new Error('the stub server did not close its connections');
      }
      // Let the FIN cross loopback into this side's socket buffer.
      const settle = Date.now() + 20;
      while (Date.now() < settle);
    },
    stop() {
      child.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** 4 MiB: larger than loopback's socket buffers take in one write. */
const BODY = new Uint8Array(4 * 1024 * 1024);
const never = new AbortController().signal;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const answer = (body: Buffer): { conn: number; bytes: number } =>
  JSON.parse(body.toString()) as { conn: number; bytes: number };

describe('HTTP transport: idle keep-alive sockets the server closes', () => {
  let server: StubServer;
  before(async () => {
    server = await startStubServer(65_000);
  });
  after(() => {
    server.stop();
  });

  it('retries an idempotent call once on a new connection when its reused socket was closed under it', async () => {
    const transport = createHttpTransport({ baseUrl: server.base, maxSockets: 1 });
    try {
      const first = await transport.request({ method: 'POST', path: '/infer', body: BODY, signal: never });
      const conn = answer(first.body).conn;
      // The race of a bench block that started as the server's keep-alive timeout closed the
      // socket: the server has closed it, and this side has not yet read the FIN when it sends.
      server.closeIdleBlocking();
      const second = await transport.request({
        method: 'POST',
        path: '/infer',
        body: BODY,
        signal: never,
        idempotent: true,
      });
      assert.equal(second.status, 200);
      assert.deepEqual(answer(second.body), { conn: conn + 1, bytes: BODY.byteLength });
      // GET is idempotent by default.
      server.closeIdleBlocking();
      const third = await transport.request({ method: 'GET', path: '/status', signal: never });
      assert.equal(answer(third.body).conn, conn + 2);
    } finally {
      transport.close();
    }
  });

  it('does not resend a call not marked idempotent: it fails with UNAVAILABLE', async () => {
    const transport = createHttpTransport({ baseUrl: server.base, maxSockets: 1 });
    try {
      await transport.request({ method: 'POST', path: '/load', body: BODY, signal: never });
      server.closeIdleBlocking();
      await assert.rejects(
        transport.request({ method: 'POST', path: '/load', body: BODY, signal: never }),
        (e: unknown) =>
          e instanceof ServingError &&
          e.code === Code.UNAVAILABLE &&
          /EPIPE|ECONNRESET|closed before a response/.test(e.message),
      );
      // The pool recovers: the next call opens a new connection.
      const next = await transport.request({ method: 'POST', path: '/load', body: BODY, signal: never });
      assert.equal(next.status, 200);
    } finally {
      transport.close();
    }
  });

  it('keeps an idle socket while the server announces it keeps it (Keep-Alive: timeout=65)', async () => {
    const transport = createHttpTransport({ baseUrl: server.base, maxSockets: 1 });
    try {
      const first = answer((await transport.request({ method: 'GET', path: '/a', signal: never })).body);
      await sleep(100);
      const second = answer((await transport.request({ method: 'GET', path: '/b', signal: never })).body);
      assert.equal(second.conn, first.conn);
    } finally {
      transport.close();
    }
  });
});

describe("HTTP transport: the server's Keep-Alive timeout hint", () => {
  let server: StubServer;
  before(async () => {
    // Announces timeout=2; node closes idle connections a second after that.
    server = await startStubServer(2000);
  });
  after(() => {
    server.stop();
  });

  it('drops an idle socket a second before the announced timeout', async () => {
    const transport = createHttpTransport({ baseUrl: server.base, maxSockets: 1 });
    try {
      const first = await transport.request({ method: 'GET', path: '/a', signal: never });
      assert.equal(first.headers['keep-alive'], 'timeout=2');
      // Past the hint less 1 s (1000 ms), well before the server closes (3000 ms).
      await sleep(1400);
      const second = await transport.request({ method: 'GET', path: '/b', signal: never });
      assert.equal(answer(second.body).conn, answer(first.body).conn + 1);
    } finally {
      transport.close();
    }
  });

  it('reads the hint', () => {
    assert.equal(idleSocketTimeout('timeout=65', 4000), 64_000);
    assert.equal(idleSocketTimeout('timeout=5, max=1000', 4000), 4000);
    assert.equal(idleSocketTimeout('max=5, timeout=10', 4000), 9000);
    assert.equal(idleSocketTimeout(undefined, 4000), 4000);
    assert.equal(idleSocketTimeout('max=5', 4000), 4000);
    assert.ok(idleSocketTimeout('timeout=1', 4000) <= 0);
  });
});
