import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import {
  Code,
  ServingError,
  createGrpcChannel,
  createInvocationsClient,
  createTfsGrpcClient,
  createTfsRestClient,
  customAttributesHeader,
  tensor,
} from '../src/index.js';

const isCode = (code: Code) => (e: unknown) => e instanceof ServingError && e.code === code;

describe('gRPC deadlines and cancellation (stub HTTP/2 server that never answers)', () => {
  let server: http2.Http2Server;
  let address: string;
  let lastTimeoutHeader: string | undefined;
  const sessions = new Set<http2.ServerHttp2Session>();
  before(async () => {
    server = http2.createServer();
    server.on('session', (s) => sessions.add(s));
    server.on('stream', (_stream, headers) => {
      lastTimeoutHeader = headers['grpc-timeout'] as string | undefined;
      // never respond
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const s of sessions) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('rejects with DEADLINE_EXCEEDED at timeoutMs and sends grpc-timeout', async () => {
    // The codec loads on the first call; load it first so that the deadline covers the call alone.
    await import('@visionserve/protocol/tfs-proto');
    const client = createTfsGrpcClient({ address });
    const t0 = performance.now();
    await assert.rejects(client.getModelStatus('m', { timeoutMs: 400 }), isCode(Code.DEADLINE_EXCEEDED));
    const elapsed = performance.now() - t0;
    assert.ok(elapsed >= 390 && elapsed < 3000, `elapsed ${elapsed}`);
    // The header carries the time left when the call went out (codec loading and connecting come first).
    assert.match(lastTimeoutHeader ?? '', /^\d+m$/);
    assert.ok(Number(lastTimeoutHeader!.slice(0, -1)) <= 400);
    client.close();
  });

  it('applies the client default deadline and honours an AbortSignal (CANCELLED)', async () => {
    const client = createTfsGrpcClient({ address, defaultTimeoutMs: 100 });
    await assert.rejects(
      client.predict('m', { x: tensor(new Float32Array(1)) }),
      isCode(Code.DEADLINE_EXCEEDED),
    );
    const controller = new AbortController();
    const call = client.getModelMetadata('m', { signal: controller.signal, timeoutMs: 10_000 });
    setTimeout(() => {
      controller.abort();
    }, 50);
    await assert.rejects(call, isCode(Code.CANCELLED));
    controller.abort();
    await assert.rejects(client.getModelStatus('m', { signal: controller.signal }), isCode(Code.CANCELLED));
    client.close();
  });

  it('maps a refused connection to UNAVAILABLE', async () => {
    const channel = createGrpcChannel({ address: '127.0.0.1:1' });
    await assert.rejects(
      channel.unary('/x/y', new Uint8Array(0), { timeoutMs: 5000 }),
      isCode(Code.UNAVAILABLE),
    );
    channel.close();
  });
});

describe('gRPC channel: response placement (stub HTTP/2 server)', () => {
  let server: http2.Http2Server;
  let address: string;
  /** What the stub answers next: the raw DATA bytes (prefix included), written in pieces of `piece`. */
  let answer: { data: Uint8Array; piece: number } = { data: new Uint8Array(0), piece: 1 };
  before(async () => {
    server = http2.createServer();
    server.on('stream', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => {
        stream.sendTrailers({ 'grpc-status': '0' });
      });
      const { data, piece } = answer;
      for (let at = 0; at < data.byteLength; at += piece) stream.write(data.subarray(at, at + piece));
      stream.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const framed = (message: Uint8Array, flag = 0): Uint8Array => {
    const out = new Uint8Array(5 + message.byteLength);
    out[0] = flag;
    new DataView(out.buffer).setUint32(1, message.byteLength);
    out.set(message, 5);
    return out;
  };

  for (const transport of ['lean', 'node'] as const) {
    it(`receives into a buffer at the offset responsePadding picks, with the same bytes (${transport})`, async () => {
      const channel = createGrpcChannel({ address, transport });
      const message = new Uint8Array(300_000).map((_, i) => (i * 31 + 7) & 0xff);
      for (const [piece, pad] of [
        [16_384, 3],
        [1000, 0],
        [70_001, 7],
        [4099, undefined],
      ] as const) {
        answer = { data: framed(message), piece };
        let seen: { held: number; start: number; length: number } | undefined;
        const got = await channel.unary('/x/y', new Uint8Array(0), {
          responsePadding: (frames, start, length) => {
            seen ??= { held: frames.reduce((n, f) => n + f.byteLength, 0), start, length };
            if (pad === undefined) seen.held = frames.reduce((n, f) => n + f.byteLength, 0);
            return pad;
          },
        });
        assert.deepEqual(seen && { start: seen.start, length: seen.length }, {
          start: 0,
          length: message.length,
        });
        if (transport === 'node' || pad === undefined) {
          // Asked with the whole message (node: only then; lean: undecided until the end).
          assert.equal(seen!.held, message.length);
        } else {
          // Lean: asked as soon as message bytes arrived, the buffer placed before the rest came.
          assert.ok(seen!.held < message.length, `held ${seen!.held}`);
        }
        assert.equal(got.byteOffset, pad ?? 0);
        assert.deepEqual(Buffer.from(got), Buffer.from(message));
      }
      channel.close();
    });
  }

  for (const transport of ['lean', 'node'] as const)
    it(`leaves small messages unplaced; refuses compressed, truncated and oversized ones (${transport})`, async () => {
      const channel = createGrpcChannel({ address, maxReceiveBytes: 150_000, transport });
      let calls = 0;
      const responsePadding = (): number => {
        calls++;
        return 1;
      };
      answer = { data: framed(new Uint8Array([1, 2, 3])), piece: 2 };
      assert.deepEqual([...(await channel.unary('/x/y', new Uint8Array(0), { responsePadding }))], [1, 2, 3]);
      answer = { data: framed(new Uint8Array(100_000), 1), piece: 16_384 };
      await assert.rejects(
        channel.unary('/x/y', new Uint8Array(0), { responsePadding }),
        isCode(Code.UNIMPLEMENTED),
      );
      // The prefix declares more than arrived.
      const short = framed(new Uint8Array(100_000));
      new DataView(short.buffer).setUint32(1, 120_000);
      answer = { data: short, piece: 16_384 };
      await assert.rejects(channel.unary('/x/y', new Uint8Array(0)), (e: unknown) => {
        assert.ok(e instanceof ServingError);
        assert.equal(e.code, Code.INTERNAL);
        assert.match(e.message, /ended after 100000 of the message's 120000 bytes/);
        return true;
      });
      // Above maxReceiveBytes: refused from the prefix.
      answer = { data: framed(new Uint8Array(200_000)), piece: 16_384 };
      await assert.rejects(channel.unary('/x/y', new Uint8Array(0)), isCode(Code.RESOURCE_EXHAUSTED));
      assert.equal(calls, 0);
      // The connection still serves calls.
      answer = { data: framed(new Uint8Array([4])), piece: 16_384 };
      assert.deepEqual([...(await channel.unary('/x/y', new Uint8Array(0)))], [4]);
      channel.close();
    });
});

/** A stub HTTP server: REST error answers, a slow route, and the /invocations contract. */
describe('HTTP clients against a stub server', () => {
  let server: http.Server;
  let base: string;
  const seen: { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer }[] = [];
  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        const json = (status: number, value: unknown): void => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(value));
        };
        if (req.url === '/v1/models/missing') {
          json(404, { error: 'Servable not found for request: Latest(missing)' });
          return;
        }
        if (req.url === '/v1/models/bad:predict') {
          json(400, { error: 'bad input' });
          return;
        }
        if (req.url === '/v1/models/slow:predict') return; // never answers
        if (req.url === '/v1/models/m') {
          json(200, {
            model_version_status: [
              { version: '3', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } },
            ],
          });
          return;
        }
        if (req.url === '/v1/models/m:predict') {
          json(200, { predictions: [[1.5, 2.5]] });
          return;
        }
        if (req.url === '/ping') {
          json(200, {});
          return;
        }
        if (req.url === '/invocations') {
          if (req.headers['content-type'] !== 'application/x-image') {
            json(415, { error: `Unsupported Media Type: ${req.headers['content-type'] ?? ''}` });
            return;
          }
          const attrs = String(req.headers['x-amzn-sagemaker-custom-attributes'] ?? '');
          const model = /tfs-model-name=([^,]+)/.exec(attrs)?.[1];
          if (model !== 'mobilenet') {
            json(404, { error: `Servable not found for request: Latest(${model ?? ''})` });
            return;
          }
          json(200, { predictions: [{ label: 'tabby, tabby cat', index: 281, score: 0.84 }] });
          return;
        }
        json(404, { error: 'Not Found' });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('REST: maps HTTP status and {"error"} to ServingError', async () => {
    const client = createTfsRestClient({ baseUrl: base });
    await assert.rejects(client.getModelStatus('missing'), (e: unknown) => {
      assert.ok(e instanceof ServingError);
      assert.equal(e.code, Code.NOT_FOUND);
      assert.equal(e.message, 'Servable not found for request: Latest(missing)');
      return true;
    });
    await assert.rejects(
      client.predict('bad', { x: tensor(new Float32Array(2), [1, 2]) }, { outputs: { y: 'float32' } }),
      isCode(Code.INVALID_ARGUMENT),
    );
    const status = await client.getModelStatus('m');
    assert.deepEqual(status, [{ version: 3, state: 'AVAILABLE', errorCode: Code.OK, errorMessage: '' }]);
    client.close();
  });

  it('REST: row-format predict names the single output from the given dtypes; deadlines apply', async () => {
    const client = createTfsRestClient({ baseUrl: base });
    const r = await client.predict(
      'm',
      { x: tensor(new Float32Array([1, 2]), [1, 2]) },
      { format: 'row', outputs: { y: 'float32' } },
    );
    assert.deepEqual(r.outputs['y']!.shape, [1, 2]);
    assert.deepEqual(Array.from(r.outputs['y']!.data as Float32Array), [1.5, 2.5]);
    const sent = seen.at(-1)!;
    assert.equal(sent.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(sent.body.toString()), { instances: [[1, 2]] });
    assert.equal(r.wire.requestBytes, sent.body.byteLength);
    await assert.rejects(
      client.predict(
        'slow',
        { x: tensor(new Float32Array(1)) },
        { timeoutMs: 100, outputs: { y: 'float32' } },
      ),
      isCode(Code.DEADLINE_EXCEEDED),
    );
    client.close();
  });

  it('/invocations: image bytes with the SageMaker custom attributes, JSON back', async () => {
    const client = createInvocationsClient({ baseUrl: base });
    const jpeg = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]);
    const r = await client.invoke(jpeg, { model: 'mobilenet', version: 2 });
    assert.deepEqual(r.json(), { predictions: [{ label: 'tabby, tabby cat', index: 281, score: 0.84 }] });
    const sent = seen.at(-1)!;
    assert.equal(sent.method, 'POST');
    assert.equal(sent.headers['content-type'], 'application/x-image');
    assert.equal(sent.headers['accept'], 'application/json');
    assert.equal(
      sent.headers['x-amzn-sagemaker-custom-attributes'],
      'tfs-model-name=mobilenet,tfs-model-version=2',
    );
    assert.deepEqual(new Uint8Array(sent.body), jpeg);
    await assert.rejects(client.invoke(jpeg, { model: 'other' }), isCode(Code.NOT_FOUND));
    await assert.rejects(client.invoke({ instances: [1] }, { model: 'mobilenet' }), (e: unknown) => {
      assert.ok(e instanceof ServingError);
      assert.match(e.message, /Unsupported Media Type: application\/json/);
      return true;
    });
    assert.equal(await client.ping(), true);
    client.close();
  });

  it('builds the custom attributes header and refuses line breaks', () => {
    assert.equal(customAttributesHeader({}), undefined);
    assert.equal(
      customAttributesHeader({ model: 'a', method: 'classify', customAttributes: { 'tfs-x': 'y' } }),
      'tfs-model-name=a,tfs-method=classify,tfs-x=y',
    );
    assert.throws(() => customAttributesHeader({ customAttributes: 'a=b\r\nX: y' }), /line breaks/);
  });
});
