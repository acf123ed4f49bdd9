/**
 * gRPC-web on the REST port, over real sockets: our fetch-based browser client (binary and
 * text framing), the stock connect-web gRPC-web transport from npm, hostile framing, CORS
 * and the management guard.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { createClient, ConnectError, Code as ConnectCode } from '@connectrpc/connect';
import { createGrpcWebTransport } from '@connectrpc/connect-web';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import {
  PredictRequestSchema,
  PredictionService,
  ModelService,
  tensorFromProto,
  tensorToProto,
} from '@visionserve/protocol/tfs-proto';
import { createTfsGrpcWebClient, createGrpcWebChannel } from '@visionserve/client/grpc-web';
import { IMAGE_PRESETS } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { argmax, image, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { grpcPredict, startHarness, type Harness } from './helpers/server-harness.js';

const PREDICT = '/tensorflow.serving.PredictionService/Predict';

/** A raw HTTP/1.1 POST (exact bytes and headers, no client logic). */
function rawPost(
  url: string,
  body: Uint8Array | string,
  headers: Record<string, string>,
  method = 'POST',
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function frame(message: Uint8Array, flag = 0): Buffer {
  const out = Buffer.alloc(5 + message.byteLength);
  out[0] = flag;
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

function halfPlusTwoRequest(values: number[]): Uint8Array {
  const request = create(PredictRequestSchema, { modelSpec: { name: 'half_plus_two' } });
  request.inputs['x'] = tensorToProto(
    { dtype: 'float32', shape: [values.length], data: Float32Array.from(values) },
    { asTensorContent: true },
  );
  return toBinary(PredictRequestSchema, request);
}

const BINARY = { 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1' };

describe('gRPC-web on the REST port', () => {
  let h: Harness;
  let root: string;
  before(async () => {
    root = await tempRepo();
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'half_plus_two' base_path: 'half_plus_two' }
      }`,
    );
    await writeFile(join(root, 'token'), 'secret-token\n');
    h = await startHarness({
      modelConfigFile: config,
      fileSystemPollSeconds: 0,
      grpcWebCorsOrigins: ['http://allowed.example'],
      adminTokenFile: join(root, 'token'),
    });
  });
  after(async () => {
    await h.close();
  });

  it('our browser client (fetch) calls Predict in binary and text framing, same answer as HTTP/2 gRPC', async () => {
    const cat = (await imageToTensor(image('cat_tabby.jpg'), IMAGE_PRESETS.imagenet)).tensor;
    const overHttp2 = await grpcPredict(h.grpc, 'mobilenet', { input: cat });
    const expected = overHttp2.outputs['output']!.data as Float32Array;
    for (const mode of ['binary', 'text'] as const) {
      const client = createTfsGrpcWebClient({ baseUrl: h.rest, mode, defaultTimeoutMs: 30_000 });
      const result = await client.predict('mobilenet', { input: cat });
      assert.equal(result.model.version, 1);
      const got = result.outputs['output']!.data as Float32Array;
      assert.equal(argmax(got), argmax(expected), mode);
      assert.deepEqual(Array.from(got), Array.from(expected), `${mode}: same scores as HTTP/2 gRPC`);
      assert.ok((result.wire?.requestBytes ?? 0) > 600_000);
    }
  });

  it('text framing is base64 on the wire and carries the trailer frame', async () => {
    const channel = createGrpcWebChannel({ baseUrl: h.rest, mode: 'text' });
    await channel.unary(PREDICT, halfPlusTwoRequest([1, 2, 5]));
    const body = frame(halfPlusTwoRequest([1, 2, 5])).toString('base64');
    const res = await rawPost(`${h.rest}${PREDICT}`, body, {
      'content-type': 'application/grpc-web-text',
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/grpc-web-text+proto');
    assert.match(res.body.toString('latin1'), /^[A-Za-z0-9+/]+=*$/);
    const bytes = Buffer.from(res.body.toString('latin1'), 'base64');
    assert.equal(bytes[0], 0);
    const length = bytes.readUInt32BE(1);
    const trailer = bytes.subarray(5 + length);
    assert.equal(trailer[0], 0x80);
    assert.match(trailer.subarray(5).toString(), /grpc-status:0\r\n/);
    assert.ok(channel.lastWire!.requestBodyBytes > 0);
  });

  it('the stock connect-web gRPC-web transport calls Predict, GetModelMetadata and GetModelStatus', async () => {
    // connect-web's gRPC-web transport speaks binary protobuf (its JSON mode is refused: 415).
    for (const useBinaryFormat of [true]) {
      const transport = createGrpcWebTransport({ baseUrl: h.rest, useBinaryFormat });
      const prediction = createClient(PredictionService, transport);
      const request = create(PredictRequestSchema, { modelSpec: { name: 'half_plus_two' } });
      request.inputs['x'] = tensorToProto(
        { dtype: 'float32', shape: [3], data: Float32Array.from([1, 2, 5]) },
        { asTensorContent: false },
      );
      const response = await prediction.predict(request);
      const y: Tensor = tensorFromProto(response.outputs['y']!, 'y');
      assert.deepEqual(Array.from(y.data as Float32Array), [2.5, 3, 4.5], `binary=${useBinaryFormat}`);
      const metadata = await prediction.getModelMetadata({
        modelSpec: { name: 'half_plus_two' },
        metadataField: ['signature_def'],
      });
      assert.ok(metadata.metadata['signature_def'] !== undefined);
      const models = createClient(ModelService, transport);
      const status = await models.getModelStatus({ modelSpec: { name: 'mobilenet' } });
      assert.equal(status.modelVersionStatus[0]!.version, 1n);
      await assert.rejects(
        prediction.predict({ modelSpec: { name: 'no_such_model' } }),
        (error: unknown) =>
          error instanceof ConnectError &&
          error.code === ConnectCode.NotFound &&
          /no_such_model/.test(error.message),
      );
    }
    const json = createClient(
      PredictionService,
      createGrpcWebTransport({ baseUrl: h.rest, useBinaryFormat: false }),
    );
    await assert.rejects(json.predict({ modelSpec: { name: 'half_plus_two' } }), /415/);
  });

  it('errors are trailers-only with the canonical code; the server keeps serving', async () => {
    const client = createTfsGrpcWebClient({ baseUrl: h.rest });
    await assert.rejects(
      client.predict('missing', { x: { dtype: 'float32', shape: [1, 1], data: Float32Array.of(1) } }),
      (error: unknown) => error instanceof ServingError && error.code === Code.NOT_FOUND,
    );
    const missing = await rawPost(`${h.rest}${PREDICT}`, frame(new Uint8Array()), BINARY);
    assert.equal(missing.status, 200);
    assert.equal(missing.body.byteLength, 0);
    assert.equal(missing.headers['grpc-status'], String(Code.INVALID_ARGUMENT));

    const cases: [string, Buffer | string, Record<string, string>, Code][] = [
      ['empty body', Buffer.alloc(0), BINARY, Code.INTERNAL],
      ['truncated prefix', Buffer.from([0, 0, 0]), BINARY, Code.INTERNAL],
      ['length past the end', frame(halfPlusTwoRequest([1])).subarray(0, 12), BINARY, Code.INTERNAL],
      ['compressed flag', frame(halfPlusTwoRequest([1]), 1), BINARY, Code.UNIMPLEMENTED],
      ['trailer flag from a client', frame(halfPlusTwoRequest([1]), 0x80), BINARY, Code.INTERNAL],
      [
        'two messages',
        Buffer.concat([frame(halfPlusTwoRequest([1])), frame(halfPlusTwoRequest([1]))]),
        BINARY,
        Code.UNIMPLEMENTED,
      ],
      ['garbage protobuf', frame(Buffer.from([0xff, 0xff, 0xff, 0xff])), BINARY, Code.INVALID_ARGUMENT],
      ['not base64', '!!!!not-base64', { 'content-type': 'application/grpc-web-text' }, Code.INTERNAL],
      [
        'huge declared length',
        Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]),
        BINARY,
        Code.RESOURCE_EXHAUSTED,
      ],
      [
        'bad grpc-timeout',
        frame(halfPlusTwoRequest([1])),
        { ...BINARY, 'grpc-timeout': 'soon' },
        Code.INVALID_ARGUMENT,
      ],
    ];
    for (const [what, body, headers, code] of cases) {
      const res = await rawPost(`${h.rest}${PREDICT}`, body, headers);
      assert.equal(res.status, 200, what);
      assert.equal(
        res.headers['grpc-status'],
        String(code),
        `${what}: ${String(res.headers['grpc-message'])}`,
      );
    }
    const unknown = await rawPost(
      `${h.rest}/tensorflow.serving.PredictionService/Nope`,
      frame(new Uint8Array()),
      BINARY,
    );
    assert.equal(unknown.headers['grpc-status'], String(Code.UNIMPLEMENTED));
    const wrongType = await rawPost(`${h.rest}${PREDICT}`, frame(new Uint8Array()), {
      'content-type': 'application/json',
    });
    assert.equal(wrongType.status, 415);
    const get = await rawPost(`${h.rest}${PREDICT}`, '', {}, 'GET');
    assert.equal(get.status, 405);
    // Still serving.
    const ok = await client.predict('half_plus_two', {
      x: { dtype: 'float32', shape: [1], data: Float32Array.of(4) },
    });
    assert.deepEqual(Array.from(ok.outputs['y']!.data as Float32Array), [4]);
  });

  it('CORS: preflights and responses for allowed origins only', async () => {
    const preflight = (origin: string) =>
      rawPost(
        `${h.rest}${PREDICT}`,
        '',
        {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,x-grpc-web',
        },
        'OPTIONS',
      );
    const allowed = await preflight('http://allowed.example');
    assert.equal(allowed.status, 204);
    assert.equal(allowed.headers['access-control-allow-origin'], 'http://allowed.example');
    assert.match(String(allowed.headers['access-control-allow-headers']), /x-grpc-web/);
    const refused = await preflight('http://evil.example');
    assert.equal(refused.status, 403);
    assert.equal(refused.headers['access-control-allow-origin'], undefined);
    const call = await rawPost(`${h.rest}${PREDICT}`, frame(halfPlusTwoRequest([1])), {
      ...BINARY,
      origin: 'http://allowed.example',
    });
    assert.equal(call.headers['access-control-allow-origin'], 'http://allowed.example');
    assert.match(String(call.headers['access-control-expose-headers']), /grpc-status/);
  });

  it('HandleReloadConfigRequest goes through the management guard', async () => {
    const transport = createGrpcWebTransport({ baseUrl: h.rest, useBinaryFormat: true });
    const models = createClient(ModelService, transport);
    const config = {
      config: {
        config: {
          case: 'modelConfigList' as const,
          value: {
            config: [
              { name: 'mobilenet', basePath: join(root, 'mobilenet') },
              { name: 'half_plus_two', basePath: join(root, 'half_plus_two') },
            ],
          },
        },
      },
    };
    await assert.rejects(
      models.handleReloadConfigRequest(config),
      (error: unknown) =>
        error instanceof ConnectError &&
        error.code === ConnectCode.PermissionDenied &&
        /admin token/.test(error.message),
    );
    const reply = await models.handleReloadConfigRequest(config, {
      headers: { authorization: 'Bearer secret-token' },
    });
    assert.equal(reply.status?.errorCode ?? 0, 0);
  });
});
