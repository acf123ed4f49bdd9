import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Code, ServingError } from '../src/index.js';
import { type Http1Response, Http1ResponseReader } from '../src/http1-response-reader.js';

const LIMITS = { maxHeadBytes: 1024, maxBodyBytes: 1 << 20 };

/** Feeds `wire` cut at `cuts`, then (when `close`) the end of the connection. */
function read(
  wire: Uint8Array,
  cuts: readonly number[] = [],
  options: { method?: string; close?: boolean; limits?: typeof LIMITS; padding?: number } = {},
): { response: Http1Response; used: number } {
  const reader = new Http1ResponseReader(
    options.method ?? 'POST',
    options.limits ?? LIMITS,
    options.padding === undefined ? undefined : () => options.padding!,
  );
  let at = 0;
  let used = 0;
  for (const end of [...cuts, wire.length]) {
    // A fresh copy per piece that is then scribbled over: the reader must keep nothing it did not copy.
    const piece = Buffer.from(wire.subarray(at, end));
    if (!reader.done) used += reader.push(piece);
    piece.fill(0xee);
    at = end;
  }
  if (options.close) reader.end();
  assert.ok(reader.done, 'response complete');
  return { response: reader.response(), used };
}

function rejects(fn: () => unknown, code: Code, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => e instanceof ServingError && e.code === code && pattern.test(e.message));
}

const text = (s: string): Buffer => Buffer.from(s, 'latin1');

/** Every way of cutting `wire` into two or three pieces gives the same response. */
function sameWhereverCut(wire: Buffer, expected: (r: Http1Response) => void, close = false): void {
  for (let i = 0; i <= wire.length; i += 1) {
    expected(read(wire, [i], { close }).response);
    const j = Math.min(wire.length, i + 1 + (i % 7));
    expected(read(wire, [i, j], { close }).response);
  }
}

describe('HTTP/1.1 response reader', { timeout: 30_000 }, () => {
  it('reads a Content-Length body, headers folded as node:http does, cut anywhere', () => {
    const body = randomBytes(300);
    const wire = Buffer.concat([
      text(
        'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-A: 1\r\nx-a:  2 \r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n' +
          `Content-Length: ${body.length}\r\n\r\n`,
      ),
      body,
    ]);
    sameWhereverCut(wire, (r) => {
      assert.equal(r.status, 200);
      assert.equal(r.headers['content-type'], 'application/json');
      assert.equal(r.headers['x-a'], '1, 2');
      assert.deepEqual(r.headers['set-cookie'], ['a=1', 'b=2']);
      assert.ok(r.keepAlive);
      assert.deepEqual(r.body, body);
    });
  });

  it('decodes chunked bodies with extensions and trailers, cut anywhere', () => {
    const a = randomBytes(40);
    const b = randomBytes(17);
    const wire = Buffer.concat([
      text('HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n28;name=value\r\n'),
      a,
      text('\r\n11\r\n'),
      b,
      text('\r\n0\r\nX-Trailer: t\r\n\r\n'),
    ]);
    sameWhereverCut(wire, (r) => {
      assert.equal(r.status, 201);
      assert.ok(r.keepAlive);
      assert.deepEqual(r.body, Buffer.concat([a, b]));
    });
  });

  it('reads a body without length to the end of the connection and does not keep it', () => {
    const body = randomBytes(64);
    const wire = Buffer.concat([text('HTTP/1.1 200 OK\r\nContent-Type: x\r\n\r\n'), body]);
    sameWhereverCut(
      wire,
      (r) => {
        assert.equal(r.keepAlive, false);
        assert.deepEqual(r.body, body);
      },
      true,
    );
  });

  it('skips interim 1xx responses; HEAD, 204 and 304 have no body', () => {
    const wire = text(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
    );
    const r = read(wire).response;
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), 'ok');
    assert.equal(r.headers['link'], undefined);
    for (const [head, method] of [
      ['HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n', 'POST'],
      ['HTTP/1.1 304 Not Modified\r\n\r\n', 'GET'],
      ['HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n', 'HEAD'],
    ] as const) {
      const { response, used } = read(text(head), [], { method });
      assert.equal(response.body.length, 0);
      assert.equal(used, head.length);
    }
  });

  it('says how many bytes were its own when the server sends more than the response', () => {
    const wire = text('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\n');
    const { response, used } = read(wire);
    assert.equal(response.body.toString(), 'abc');
    assert.equal(used, wire.length - 'HTTP/1.1 200 OK\r\n'.length);
  });

  it('keeps the connection by HTTP version and Connection, never with both lengths', () => {
    const keep = (head: string): boolean =>
      read(text(`${head}\r\nContent-Length: 0\r\n\r\n`)).response.keepAlive;
    assert.equal(keep('HTTP/1.1 200 OK'), true);
    assert.equal(keep('HTTP/1.1 200 OK\r\nConnection: close'), false);
    assert.equal(keep('HTTP/1.1 200 OK\r\nConnection: Upgrade, Close'), false);
    assert.equal(keep('HTTP/1.0 200 OK'), false);
    assert.equal(keep('HTTP/1.0 200 OK\r\nConnection: keep-alive'), true);
    const both = text(
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n',
    );
    const r = read(both).response;
    assert.equal(r.body.toString(), 'x');
    assert.equal(r.keepAlive, false);
  });

  it('places a known-length body at the requested offset of its own buffer', () => {
    for (const padding of [0, 3, 7]) {
      const r = read(text('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd'), [], { padding }).response;
      assert.equal(r.body.byteOffset, padding);
      assert.equal(r.body.buffer.byteLength, padding + 4);
      assert.equal(r.body.toString(), 'abcd');
    }
  });

  it('lets the socket read a known-length body straight into place (room/advance)', () => {
    const reader = new Http1ResponseReader('POST', LIMITS);
    assert.equal(reader.room(), undefined);
    reader.push(text('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123'));
    const room = reader.room()!;
    assert.equal(room.length, 6);
    room.set(text('456'));
    assert.equal(reader.advance(3), false);
    reader.room()!.set(text('789'));
    assert.equal(reader.advance(3), true);
    assert.equal(reader.room(), undefined);
    assert.equal(reader.response().body.toString(), '0123456789');
  });

  it('refuses malformed heads with UNAVAILABLE', () => {
    const bad = [
      'HTTP/2 200 OK\r\n\r\n',
      'HTTP/1.1 20 OK\r\n\r\n',
      'ICY 200 OK\r\n\r\n',
      'HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n',
      'HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n',
      'HTTP/1.1 200 OK\r\n: empty\r\n\r\n',
      'HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999\r\n\r\n',
      'HTTP/1.1 101 Switching Protocols\r\n\r\n',
      'HTTP/1.1 099 Odd\r\n\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n',
    ];
    for (const head of bad) {
      rejects(() => read(text(head)), Code.UNAVAILABLE, /Malformed HTTP response/);
    }
    // Repeated equal lengths are one length.
    assert.equal(
      read(text('HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\nx')).response.body.toString(),
      'x',
    );
  });

  it('refuses malformed chunked framing with UNAVAILABLE', () => {
    const head = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
    for (const rest of [
      'zz\r\n',
      '-1\r\n',
      '1\r\nxy\r\n',
      '1\r\nx\n',
      '1\nx\r\n',
      `${'0'.repeat(5000)}1\r\n`,
      '10000000000000000\r\n',
    ]) {
      rejects(() => read(text(head + rest)), Code.UNAVAILABLE, /Malformed HTTP response/);
    }
  });

  it('bounds the head and the body', () => {
    rejects(
      () => read(text(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(2000)}\r\n\r\n`)),
      Code.UNAVAILABLE,
      /header section larger than 1024 bytes/,
    );
    // Bounded before the end of the head arrives, too.
    const reader = new Http1ResponseReader('GET', LIMITS);
    reader.push(text('HTTP/1.1 200 OK\r\n'));
    rejects(() => reader.push(text(`X: ${'a'.repeat(1100)}`)), Code.UNAVAILABLE, /header section larger/);
    const small = { maxHeadBytes: 1024, maxBodyBytes: 8 };
    rejects(
      () => read(text('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n123456789'), [], { limits: small }),
      Code.RESOURCE_EXHAUSTED,
      /Response of 9 bytes exceeds the limit of 8/,
    );
    rejects(
      () =>
        read(text('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n5\r\n'), [], {
          limits: small,
        }),
      Code.RESOURCE_EXHAUSTED,
      /exceeds the limit of 8 bytes/,
    );
    rejects(
      () => read(text('HTTP/1.1 200 OK\r\n\r\n123456789'), [], { limits: small, close: true }),
      Code.RESOURCE_EXHAUSTED,
      /exceeds the limit of 8 bytes/,
    );
  });

  it('says how a response was cut short when the connection ends', () => {
    const cut =
      (wire: string): (() => void) =>
      () => {
        const reader = new Http1ResponseReader('GET', LIMITS);
        reader.push(text(wire));
        reader.end();
      };
    rejects(cut(''), Code.UNAVAILABLE, /^Connection closed before a response$/);
    rejects(cut('HTTP/1.1 200'), Code.UNAVAILABLE, /in the middle of the response/);
    rejects(
      cut('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'),
      Code.UNAVAILABLE,
      /Response ended after 3 of 10 bytes/,
    );
    rejects(
      cut('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab'),
      Code.UNAVAILABLE,
      /in the middle/,
    );
  });

  it('refuses a head whose lines end with a bare LF at once', () => {
    for (const wire of ['HTTP/1.1 200 OK\nContent-Length: 0\n\n', 'HTTP/1.1 200 OK\r\nA: b\n', '\n']) {
      rejects(() => read(text(wire)), Code.UNAVAILABLE, /not ended by CRLF/);
    }
    // Also when the CR and LF arrive in different reads.
    const ok = text('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
    for (let i = 1; i < ok.length; i += 1) assert.equal(read(ok, [i]).response.status, 200);
  });

  it('headers as node:http gives them: first of single-valued fields, no prototype keys', () => {
    const r = read(
      text(
        'HTTP/1.1 200 OK\r\nContent-Type: a\r\nContent-Type: b\r\nconstructor: x\r\nX-Y: 1\r\nX-Y: 2\r\nContent-Length: 0\r\n\r\n',
      ),
    ).response;
    assert.equal(r.headers['content-type'], 'a');
    assert.equal((r.headers as Record<string, unknown>)['constructor'], 'x');
    assert.equal(r.headers['x-y'], '1, 2');
  });

  it('stays linear on hostile heads: long whitespace runs, one byte per read', () => {
    const big = { maxHeadBytes: 256 * 1024, maxBodyBytes: 1 << 20 };
    const spaces = text(
      `HTTP/1.1 200 OK\r\nX: a${' '.repeat(60_000)}b\r\nY:${' \t'.repeat(30_000)}\r\nContent-Length: 0${' '.repeat(60_000)}\r\n\r\n`,
    );
    let started = performance.now();
    assert.equal(read(spaces, [], { limits: big }).response.headers['x'], `a${' '.repeat(60_000)}b`);
    assert.ok(performance.now() - started < 2000, `long whitespace took ${performance.now() - started} ms`);
    const long = text(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(32 * 1024)}\r\nContent-Length: 0\r\n\r\n`);
    const reader = new Http1ResponseReader('GET', big);
    started = performance.now();
    for (let i = 0; i < long.length; i += 1) reader.push(long.subarray(i, i + 1));
    assert.ok(reader.done);
    assert.ok(
      performance.now() - started < 5000,
      `byte-per-read head took ${performance.now() - started} ms`,
    );
  });

  it('bounds the trailer section as a whole', () => {
    const lines = 'X: 1234567890\r\n'.repeat(100);
    rejects(
      () => read(text(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n${lines}\r\n`)),
      Code.UNAVAILABLE,
      /trailer section too long/,
    );
  });

  it('survives random bytes: a response, a clear error, or waiting for more, never anything else', () => {
    const prefixes = ['', 'HTTP/1.1 200 OK\r\n', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n'];
    for (let round = 0; round < 3000; round += 1) {
      const reader = new Http1ResponseReader('GET', LIMITS);
      const wire = Buffer.concat([text(prefixes[round % 3]!), randomBytes(round % 200)]);
      try {
        reader.push(wire);
        reader.end();
      } catch (error) {
        assert.ok(error instanceof ServingError, String(error));
        assert.ok([Code.UNAVAILABLE, Code.RESOURCE_EXHAUSTED].includes(error.code), error.message);
      }
    }
  });
});
