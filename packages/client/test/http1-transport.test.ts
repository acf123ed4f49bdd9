import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { Code, ServingError } from '../src/index.js';
import { createHttpTransport, type HttpTransport } from '../src/http-transport.js';

/** One request as the raw server saw it. */
interface SeenRequest {
  readonly conn: number;
  readonly head: string;
  readonly body: Buffer;
}

/**
 * A TCP server that speaks just enough HTTP/1.1 to read requests with a Content-Length, and
 * answers each with whatever bytes the current `answer` writes (so a test can send any
 * framing, good or bad).
 */
class RawServer {
  answer: (request: SeenRequest, socket: net.Socket) => void = (_r, s) => {
    s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  };
  readonly seen: SeenRequest[] = [];
  /** Numbers of the connections the client has closed. */
  readonly closed = new Set<number>();
  connections = 0;
  private readonly server = net.createServer((socket) => {
    const conn = ++this.connections;
    let pending = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('close', () => this.closed.add(conn));
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = pending.subarray(0, end).toString('latin1');
        const length = Number(/^content-length: *(\d+)/im.exec(head)?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        const request = { conn, head, body: Buffer.from(pending.subarray(end + 4, end + 4 + length)) };
        pending = pending.subarray(end + 4 + length);
        this.seen.push(request);
        this.answer(request, socket);
      }
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  stop(): void {
    this.server.close();
  }
}

/** Waits until `condition` holds (checked every 5 ms), failing after 10 s: no fixed sleeps. */
async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached in 10 s');
    await new Promise((r) => setTimeout(r, 5));
  }
}

function serving(code: Code, pattern: RegExp): (e: unknown) => boolean {
  return (e) => e instanceof ServingError && e.code === code && pattern.test(e.message);
}

describe('HTTP/1.1 transport of our own (raw TCP server)', { timeout: 30_000 }, () => {
  const server = new RawServer();
  let base = '';
  let transport: HttpTransport;
  const post = (
    body: Uint8Array | Uint8Array[],
    extra: Partial<Parameters<HttpTransport['request']>[0]> = {},
  ) =>
    transport.request({
      method: 'POST',
      path: '/p?q=1',
      body,
      signal: new AbortController().signal,
      ...extra,
    });

  before(async () => {
    base = await server.start();
    transport = createHttpTransport({ baseUrl: `${base}/prefix/`, maxSockets: 2, headers: { 'x-all': 'a' } });
  });
  after(() => {
    transport.close();
    server.stop();
  });

  it('sends the request line, headers and body pieces; reuses the connection', async () => {
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    const before = server.connections;
    const res = await post([Buffer.from('ab'), new Uint8Array(0), Buffer.from('cde')], {
      headers: { 'X-One': '1' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), 'ok');
    const seen = server.seen.at(-1)!;
    assert.match(seen.head, /^POST \/prefix\/p\?q=1 HTTP\/1\.1\r\n/);
    assert.match(seen.head, /\r\nx-all: a\r\n/);
    assert.match(seen.head, /\r\nX-One: 1\r\n/);
    assert.match(seen.head, new RegExp(`\\r\\nHost: ${base.slice(7).replace(/\./g, '\\.')}\\r\\n`));
    assert.match(seen.head, /\r\nContent-Length: 5(\r\n|$)/);
    assert.equal(seen.body.toString(), 'abcde');
    await post(Buffer.from('x'));
    assert.equal(server.connections, before + 1, 'one connection for both calls');
    assert.equal(server.seen.at(-1)!.conn, seen.conn);
  });

  it('reads a large body into one buffer, in order, at the offset asked for', async () => {
    const payload = randomBytes(6 * 1024 * 1024 + 13);
    server.answer = (_r, s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${payload.length}\r\n\r\n`);
      // In uneven pieces, so that reads straddle them.
      for (let at = 0; at < payload.length; at += 300_001) s.write(payload.subarray(at, at + 300_001));
    };
    for (const padding of [0, 5]) {
      const res = await post(Buffer.from('x'), { bodyPadding: () => padding });
      assert.equal(res.body.byteOffset, padding);
      assert.equal(res.body.buffer.byteLength, payload.length + padding);
      assert.ok(res.body.equals(payload));
    }
  });

  it('reads chunked bodies and bodies that end with the connection; does not reuse the latter', async () => {
    server.answer = (_r, s) =>
      s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n');
    assert.equal((await post(Buffer.from('x'))).body.toString(), 'abcde');
    server.answer = (_r, s) => s.end('HTTP/1.1 200 OK\r\n\r\nuntil close');
    const conn = (await post(Buffer.from('x')).then((r) => r.body.toString())) === 'until close';
    assert.ok(conn);
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    const last = server.seen.at(-1)!.conn;
    await post(Buffer.from('x'));
    assert.notEqual(server.seen.at(-1)!.conn, last, 'a new connection after a close-delimited body');
  });

  it('drops a connection after Connection: close, or after bytes beyond the response', async () => {
    for (const extra of ['Connection: close\r\n', '']) {
      server.answer = (_r, s) =>
        s.write(`HTTP/1.1 200 OK\r\n${extra}Content-Length: 2\r\n\r\nok${extra === '' ? 'JUNK' : ''}`);
      const res = await post(Buffer.from('x'));
      assert.equal(res.body.toString(), 'ok');
      const used = server.seen.at(-1)!.conn;
      server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      await post(Buffer.from('x'));
      assert.notEqual(server.seen.at(-1)!.conn, used);
    }
  });

  it('a connection that speaks out of turn is dropped; the next call gets a new one', async () => {
    server.answer = (_r, s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      setTimeout(() => s.write('unasked'), 20);
    };
    await post(Buffer.from('x'));
    const used = server.seen.at(-1)!.conn;
    await until(() => server.closed.has(used));
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    assert.equal((await post(Buffer.from('x'))).status, 200);
    assert.notEqual(server.seen.at(-1)!.conn, used);
  });

  it('malformed, truncated and oversized answers fail the call with a clear error', async () => {
    server.answer = (_r, s) => s.write('HTTP/1.1 OK\r\n\r\n');
    await assert.rejects(
      post(Buffer.from('x')),
      serving(Code.UNAVAILABLE, /Malformed HTTP response: bad status line/),
    );
    server.answer = (_r, s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
    await assert.rejects(
      post(Buffer.from('x')),
      serving(Code.UNAVAILABLE, /Response ended after 3 of 10 bytes/),
    );
    server.answer = (_r, s) => s.destroy();
    await assert.rejects(post(Buffer.from('x'), { idempotent: false }), serving(Code.UNAVAILABLE, /./));
    const small = createHttpTransport({ baseUrl: base, maxResponseBytes: 4 });
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n12345');
    await assert.rejects(
      small.request({ method: 'GET', path: '/', signal: new AbortController().signal }),
      serving(Code.RESOURCE_EXHAUSTED, /Response of 5 bytes exceeds the limit of 4/),
    );
    small.close();
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    assert.equal((await post(Buffer.from('x'))).status, 200, 'the transport still works');
  });

  it('refuses header names and values that would break the request', async () => {
    await assert.rejects(
      post(Buffer.from('x'), { headers: { 'x-bad': 'a\r\nInjected: 1' } }),
      serving(Code.INVALID_ARGUMENT, /Invalid HTTP header/),
    );
    await assert.rejects(
      post(Buffer.from('x'), { headers: { 'bad name': 'a' } }),
      serving(Code.INVALID_ARGUMENT, /Invalid HTTP header/),
    );
  });

  it('refuses header values and paths node:http refuses (no CR/LF through latin1 either)', async () => {
    const count = server.seen.length;
    for (const headers of [
      { 'x-a': 'v\u010d\u010aInjected: yes' },
      { 'x-a': 'v\u0100' },
      { 'x-a': 'bell\u0007' },
      { 'x-a': 'del\u007f' },
    ]) {
      await assert.rejects(
        post(Buffer.from('x'), { headers }),
        serving(Code.INVALID_ARGUMENT, /Invalid HTTP header/),
      );
    }
    for (const path of ['/a HTTP/1.1\r\nX: y\r\n\r\nGET /b', '/a b', '/\u0130']) {
      await assert.rejects(post(Buffer.from('x'), { path }), serving(Code.INVALID_ARGUMENT, /request path/));
    }
    assert.equal(server.seen.length, count, 'nothing was sent');
    // Values node accepts go through as written: tabs and latin1 text.
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    await post(Buffer.from('x'), { headers: { 'x-tab': 'a\tb', 'x-latin': 'caf\u00e9' } });
    const head = server.seen.at(-1)!.head;
    assert.match(head, /\r\nx-tab: a\tb\r\n/);
    assert.match(head, /\r\nx-latin: caf\u00e9\r\n/);
  });

  it('sends one value per field whatever its case, the call over the client, and its own framing fields', async () => {
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    await post(Buffer.from('abc'), {
      headers: { 'X-ALL': 'b', 'content-length': '99', Connection: 'close', 'Transfer-Encoding': 'chunked' },
    });
    const head = server.seen.at(-1)!.head;
    assert.equal(head.match(/x-all/gi)!.length, 1);
    assert.match(head, /\r\nX-ALL: b\r\n/);
    assert.equal(head.match(/content-length/gi)!.length, 1);
    assert.match(head, /\r\nContent-Length: 3(\r\n|$)/);
    assert.doesNotMatch(head, /chunked|close/i);
    await transport.request({ method: 'POST', path: '/', signal: new AbortController().signal });
    assert.match(server.seen.at(-1)!.head, /\r\nContent-Length: 0(\r\n|$)/);
  });

  it('an abort mid-response rejects with its reason and closes the connection', async () => {
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc');
    const controller = new AbortController();
    const count = server.seen.length;
    const call = post(Buffer.from('x'), { signal: controller.signal });
    await until(() => server.seen.length > count);
    const used = server.seen.at(-1)!.conn;
    controller.abort(new ServingError(Code.CANCELLED, 'stop'));
    await assert.rejects(call, serving(Code.CANCELLED, /^stop$/));
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    await post(Buffer.from('x'));
    assert.notEqual(server.seen.at(-1)!.conn, used);
  });

  it('an abort that lands while the connection is being handed over sends nothing', async () => {
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    await post(Buffer.from('warm')); // an idle connection: the hand-over takes one microtask
    const count = server.seen.length;
    const controller = new AbortController();
    // Queued before the call's own continuation, so it runs between acquiring and sending.
    void Promise.resolve().then(() => {
      controller.abort(new ServingError(Code.CANCELLED, 'too late'));
    });
    await assert.rejects(
      post(Buffer.from('x'), { signal: controller.signal }),
      serving(Code.CANCELLED, /too late/),
    );
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(server.seen.length, count, 'nothing was sent');
  });

  it('holds calls beyond maxSockets until a connection is free; a waiting call can be aborted', async () => {
    const held: net.Socket[] = [];
    server.answer = (_r, s) => held.push(s);
    const calls = [post(Buffer.from('1')), post(Buffer.from('2')), post(Buffer.from('3'))];
    const controller = new AbortController();
    const aborted = post(Buffer.from('4'), { signal: controller.signal });
    await until(() => held.length === 2);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(held.length, 2, 'two connections (maxSockets), the others wait');
    controller.abort(new ServingError(Code.CANCELLED, 'gave up waiting'));
    await assert.rejects(aborted, serving(Code.CANCELLED, /gave up waiting/));
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    for (const s of held.splice(0)) s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    const results = await Promise.all(calls);
    assert.deepEqual(
      results.map((r) => r.body.toString()),
      ['ok', 'ok', 'ok'],
    );
    assert.deepEqual(
      server.seen
        .slice(-3)
        .map((r) => r.body.toString())
        .sort(),
      ['1', '2', '3'],
    );
  });

  it('a waiting call woken just as it is aborted passes its turn on (no call left hanging)', async () => {
    const one = createHttpTransport({ baseUrl: base, maxSockets: 1 });
    const held: net.Socket[] = [];
    server.answer = (_r, s) => held.push(s);
    const shared = new AbortController();
    const first = one.request({ method: 'POST', path: '/1', body: Buffer.from('1'), signal: shared.signal });
    // The first call's abort listener is then registered before the second's.
    await new Promise((r) => setTimeout(r, 20));
    const second = one.request({ method: 'POST', path: '/2', body: Buffer.from('2'), signal: shared.signal });
    const third = one.request({
      method: 'POST',
      path: '/3',
      body: Buffer.from('3'),
      signal: new AbortController().signal,
    });
    await until(() => held.length === 1);
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    // Aborting ends the first call's connection, which wakes the second: aborted too, it must wake the third.
    shared.abort(new ServingError(Code.CANCELLED, 'batch cancelled'));
    await assert.rejects(first, serving(Code.CANCELLED, /batch cancelled/));
    await assert.rejects(second, serving(Code.CANCELLED, /batch cancelled/));
    assert.equal((await third).body.toString(), 'ok');
    one.close();
  });

  it('close() drops idle connections now and busy ones when their call ends; the transport still works', async () => {
    const t = createHttpTransport({ baseUrl: base, maxSockets: 4 });
    let finish: (() => void) | undefined;
    server.answer = (_r, s) => {
      finish = () => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    };
    const busy = t.request({ method: 'GET', path: '/busy', signal: new AbortController().signal });
    await until(() => finish !== undefined);
    const busyConn = server.seen.at(-1)!.conn;
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    await t.request({ method: 'GET', path: '/idle', signal: new AbortController().signal });
    const idleConn = server.seen.at(-1)!.conn;
    assert.notEqual(busyConn, idleConn);
    t.close();
    finish!();
    assert.equal((await busy).body.toString(), 'ok');
    server.answer = (_r, s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    await t.request({ method: 'GET', path: '/after', signal: new AbortController().signal });
    assert.ok(![idleConn, busyConn].includes(server.seen.at(-1)!.conn), 'neither old connection was reused');
    t.close();
  });

  it('a refused connection is UNAVAILABLE', async () => {
    const closed = new RawServer();
    const url = await closed.start();
    closed.stop();
    await new Promise((r) => setTimeout(r, 20));
    const t = createHttpTransport({ baseUrl: url });
    await assert.rejects(
      t.request({ method: 'GET', path: '/', signal: new AbortController().signal }),
      serving(Code.UNAVAILABLE, /HTTP request to 127\.0\.0\.1:\d+ failed: connect ECONNREFUSED/),
    );
    t.close();
  });
});
