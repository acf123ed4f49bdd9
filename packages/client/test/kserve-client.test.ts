import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import { decodeHttpInferRequest, encodeHttpInferResponse } from '@visionserve/protocol/kserve';
import { create, toBinary } from '@bufbuild/protobuf';
import {
  ServerLiveResponseSchema,
  decodeModelInferRequest,
  writeModelInferResponse,
} from '@visionserve/protocol/kserve-proto';
import {
  Code,
  ServingError,
  createKServeGrpcClient,
  createKServeHttpClient,
  stringTensorOf,
  tensor,
} from '../src/index.js';

/** A stub KServe server: echoes input x as output y (decoding the request for real), records headers. */
describe('KServe HTTP client (stub server)', () => {
  let server: http.Server;
  let base: string;
  const seen: http.IncomingHttpHeaders[] = [];
  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.headers);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let body = Buffer.concat(chunks);
        if (req.url === '/v2/models/missing/infer') {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end('{"error":"Request for unknown model: \'missing\' is not found"}');
          return;
        }
        if (req.url === '/v2/models/bad/infer') {
          res.writeHead(200, { 'inference-header-content-length': '999' });
          res.end('{}');
          return;
        }
        if (req.url?.endsWith('/ready')) {
          res.writeHead(req.url.includes('nope') ? 400 : 200);
          res.end();
          return;
        }
        if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
        const request = decodeHttpInferRequest(
          body,
          req.headers['inference-header-content-length'] as string | undefined,
        );
        const binary = request.outputs?.map((o) => o.parameters['binary_data'] === true) ?? [
          request.parameters['binary_data_output'] === true,
        ];
        const encoded = encodeHttpInferResponse(
          {
            modelName: 'm',
            modelVersion: '4',
            id: request.id,
            outputs: [{ name: 'y', tensor: request.inputs[0]!.tensor }],
          },
          binary,
        );
        let out = Buffer.concat([encoded.json, ...encoded.binary]);
        const headers: Record<string, string> = {};
        if (encoded.binaryBytes > 0)
          headers['Inference-Header-Content-Length'] = String(encoded.json.byteLength);
        if (req.headers['accept-encoding'] === 'gzip') {
          out = gzipSync(out);
          headers['Content-Encoding'] = 'gzip';
        }
        headers['Content-Length'] = String(out.byteLength); // as visionserve sends it
        res.writeHead(200, headers);
        res.end(out);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends binary tensors with Inference-Header-Content-Length and reads binary outputs', async () => {
    const client = createKServeHttpClient({ baseUrl: base });
    const x = tensor(Float32Array.of(1, 2, 3), [3]);
    const r = await client.infer({ name: 'm', version: 4 }, { x }, { id: 'abc' });
    assert.deepEqual([...(r.outputs['y']!.data as Float32Array)], [1, 2, 3]);
    assert.deepEqual(r.model, { name: 'm', version: 4 });
    assert.equal(r.id, 'abc');
    const headers = seen.at(-1)!;
    assert.equal(headers['content-type'], 'application/octet-stream');
    assert.ok(Number(headers['inference-header-content-length']) > 0);
    assert.ok(r.wire.requestBytes > 12 && r.wire.responseBytes > 12);
    client.close();
  });

  it("binary outputs never view Node's shared Buffer pool, whatever the JSON header length", async () => {
    const client = createKServeHttpClient({ baseUrl: base });
    // Ids of 1..8 characters: one of them makes the header a multiple of 8 bytes (no padding).
    for (let n = 1; n <= 8; n++) {
      const r = await client.infer(
        { name: 'm', version: 4 },
        { x: tensor(Float32Array.of(1, 2, 3, 4), [4]) },
        {
          id: 'i'.repeat(n),
        },
      );
      const data = r.outputs['y']!.data as Float32Array;
      assert.deepEqual([...data], [1, 2, 3, 4]);
      assert.ok(
        data.buffer.byteLength < Buffer.poolSize,
        `id of ${n}: a ${data.buffer.byteLength}-byte buffer`,
      );
    }
    client.close();
  });

  it('JSON both ways, compression both ways', async () => {
    const client = createKServeHttpClient({ baseUrl: base, binary: false });
    const x = tensor(Int32Array.of(7, 8), [2]);
    const r = await client.infer('m', { x }, { outputs: ['y'] });
    assert.deepEqual([...(r.outputs['y']!.data as Int32Array)], [7, 8]);
    assert.equal(seen.at(-1)!['inference-header-content-length'], undefined);
    const z = await client.infer(
      'm',
      { x },
      { requestCompression: 'gzip', responseCompression: 'gzip', binaryOutputs: true },
    );
    assert.deepEqual([...(z.outputs['y']!.data as Int32Array)], [7, 8]);
    assert.equal(seen.at(-1)!['content-encoding'], 'gzip');
    client.close();
  });

  it('maps errors, readiness and malformed answers', async () => {
    const client = createKServeHttpClient({ baseUrl: base });
    await assert.rejects(
      client.infer('missing', { x: tensor(Float32Array.of(1)) }),
      (e: unknown) => e instanceof ServingError && e.code === Code.NOT_FOUND && /missing/.test(e.message),
    );
    await assert.rejects(
      client.infer('bad', { x: tensor(Float32Array.of(1)) }),
      (e: unknown) => e instanceof ServingError && e.code === Code.INTERNAL && /Malformed/.test(e.message),
    );
    assert.equal(await client.modelReady('ok'), true);
    assert.equal(await client.modelReady('nope'), false);
    await assert.rejects(client.infer({ name: 'm', version: 'x' }, {}), /non-negative integer/);
    client.close();
  });
});

/** A stub gRPC server (node:http2): ModelInfer echoes input x as y (decoded for real); other calls by path. */
describe('KServe gRPC client (stub server)', () => {
  let server: http2.Http2Server;
  let address: string;
  before(async () => {
    server = http2.createServer();
    server.on('stream', (stream, headers) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const message = Buffer.concat(chunks).subarray(5);
        const path = headers[':path'] ?? '';
        const reply = (bytes: Uint8Array[]): void => {
          const length = bytes.reduce((n, b) => n + b.byteLength, 0);
          const prefix = Buffer.alloc(5);
          prefix.writeUInt32BE(length, 1);
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.once('wantTrailers', () => {
            stream.sendTrailers({ 'grpc-status': '0' });
          });
          stream.end(Buffer.concat([prefix, ...bytes]));
        };
        if (path.endsWith('/ModelInfer')) {
          const request = decodeModelInferRequest(message);
          if (request.modelName === 'missing') {
            stream.respond(
              {
                ':status': 200,
                'content-type': 'application/grpc',
                'grpc-status': '5',
                'grpc-message': 'no%20such',
              },
              { endStream: true },
            );
            return;
          }
          reply(
            writeModelInferResponse({
              modelName: request.modelName,
              modelVersion: '4',
              id: request.id,
              outputs: [{ name: 'y', tensor: request.inputs[0]!.tensor }],
            }),
          );
        } else if (path.endsWith('/ServerLive')) {
          reply([toBinary(ServerLiveResponseSchema, create(ServerLiveResponseSchema, { live: true }))]);
        } else {
          stream.respond(
            { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' },
            { endStream: true },
          );
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.close();
  });

  it('sends raw contents and reads raw outputs, id and version; maps statuses', async () => {
    const client = createKServeGrpcClient({ address });
    try {
      const x = tensor(Float32Array.of(1, 2, 3, 4), [2, 2]);
      const result = await client.infer('m', { x }, { id: 'r1' });
      assert.deepEqual(Array.from(result.outputs['y']!.data as Float32Array), [1, 2, 3, 4]);
      assert.deepEqual(result.outputs['y']!.shape, [2, 2]);
      assert.equal(result.id, 'r1');
      assert.deepEqual(result.model, { name: 'm', version: 4 });
      assert.ok(result.wire.requestBytes > 16 && result.wire.responseBytes > 16);
      const s = stringTensorOf(['héllo']);
      const echoed = await client.predict({ name: 'm', version: 3 }, { s });
      assert.equal(Buffer.from((echoed.outputs['y']!.data as Uint8Array[])[0]!).toString(), 'héllo');
      assert.equal(await client.serverLive(), true);
      await assert.rejects(
        client.infer('missing', { x }),
        (e: unknown) => e instanceof ServingError && e.code === Code.NOT_FOUND && e.message === 'no such',
      );
      await assert.rejects(
        client.serverReady(),
        (e: unknown) => e instanceof ServingError && e.code === Code.UNIMPLEMENTED,
      );
      assert.throws(() => client.infer({ name: 'm', version: 'v1' }, { x }), /non-negative integer/);
    } finally {
      client.close();
    }
  });
});
