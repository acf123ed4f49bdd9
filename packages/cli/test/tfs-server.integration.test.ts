import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import { PredictRequestSchema, DataType } from '@visionserve/protocol/tfs-proto';
import { IMAGE_PRESETS } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { argmax, image, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import {
  grpcPredict,
  nest,
  postJson,
  rawHttp,
  startHarness,
  type Harness,
} from './helpers/server-harness.js';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { create, toBinary } from '@bufbuild/protobuf';

async function catTensor(): Promise<Tensor> {
  return (await imageToTensor(image('cat_tabby.jpg'), IMAGE_PRESETS.imagenet)).tensor;
}

describe('TF Serving API on real models (REST + gRPC)', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo();
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    await placeModel(root, 'detector', 1, sharedModel('yolox_nano_tfod.onnx'));
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' model_platform: 'onnx' }
        config { name: 'detector' base_path: 'detector' }
        config { name: 'half_plus_two' base_path: 'half_plus_two' }
      }`,
    );
    h = await startHarness({ modelConfigFile: config, fileSystemPollSeconds: 0 });
  });
  after(async () => {
    await h.close();
  });

  it('REST row format classifies the tabby cat (281)', async () => {
    const t = await catTensor();
    const { status, json } = await postJson(`${h.rest}/v1/models/mobilenet:predict`, {
      instances: nest(t.data as Float32Array, t.shape),
    });
    assert.equal(status, 200);
    const predictions = (json as { predictions: number[][] }).predictions;
    assert.equal(predictions.length, 1);
    assert.equal(argmax(predictions[0]!), 281);
  });

  it('REST columnar format classifies the tabby cat (281)', async () => {
    const t = await catTensor();
    const { status, json } = await postJson(`${h.rest}/v1/models/mobilenet/versions/1:predict`, {
      signature_name: 'serving_default',
      inputs: { input: nest(t.data as Float32Array, t.shape) },
    });
    assert.equal(status, 200);
    assert.equal(argmax((json as { outputs: number[][] }).outputs[0]!), 281);
  });

  it('gRPC Predict with tensor_content and with float_val classifies the tabby cat', async () => {
    for (const asTensorContent of [true, false]) {
      const { outputs, version } = await grpcPredict(
        h.grpc,
        'mobilenet',
        { input: await catTensor() },
        { asTensorContent },
      );
      assert.equal(version, 1n);
      assert.deepEqual(outputs['output']!.shape, [1, 1000]);
      assert.equal(argmax(outputs['output']!.data as Float32Array), 281);
    }
  });

  it('gRPC Predict on the TF-OD detector finds three persons and a sports ball (uint8 input)', async () => {
    const { data, info } = await sharp(image('scene_soccer.jpg'))
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    const input: Tensor = {
      dtype: 'uint8',
      shape: [1, info.height, info.width, 3],
      data: new Uint8Array(data),
    };
    const { outputs } = await grpcPredict(
      h.grpc,
      'detector',
      { input_tensor: input },
      {
        outputFilter: ['detection_classes', 'detection_scores', 'detection_boxes'],
      },
    );
    assert.deepEqual(Object.keys(outputs).sort(), [
      'detection_boxes',
      'detection_classes',
      'detection_scores',
    ]);
    const scores = outputs['detection_scores']!.data as Float32Array;
    const classes = outputs['detection_classes']!.data as Float32Array;
    const found: number[] = [];
    for (let i = 0; i < scores.length; i++) if (scores[i]! > 0.5) found.push(classes[i]!);
    assert.equal(found.filter((c) => c === 1).length, 3, `persons in ${found.join(',')}`);
    assert.equal(found.filter((c) => c === 37).length, 1, 'one sports ball');
  });

  it('half_plus_two answers the TF Serving quick-start request', async () => {
    const { status, json } = await postJson(`${h.rest}/v1/models/half_plus_two:predict`, {
      instances: [1.0, 2.0, 5.0],
    });
    assert.equal(status, 200);
    assert.deepEqual(json, { predictions: [2.5, 3, 4.5] });
  });

  it('maps bad inputs to INVALID_ARGUMENT / 400 naming the problem, unknown models to NOT_FOUND / 404', async () => {
    const wrongName = await postJson(`${h.rest}/v1/models/mobilenet:predict`, { inputs: { images: [[1]] } });
    assert.equal(wrongName.status, 400);
    assert.match(JSON.stringify(wrongName.json), /images/);
    const wrongShape = await postJson(`${h.rest}/v1/models/mobilenet:predict`, { instances: [[1, 2, 3]] });
    assert.equal(wrongShape.status, 400);
    const missing = await postJson(`${h.rest}/v1/models/nope:predict`, { instances: [1] });
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.json, { error: 'Servable not found for request: Latest(nope)' });
    await assert.rejects(
      grpcPredict(h.grpc, 'mobilenet', { input: { dtype: 'int32', shape: [1], data: new Int32Array(1) } }),
      (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT,
    );
    await assert.rejects(
      grpcPredict(h.grpc, 'mobilenet', { input: await catTensor() }, { version: 5 }),
      (e: unknown) =>
        e instanceof ServingError &&
        e.code === Code.NOT_FOUND &&
        e.message.includes('Specific(mobilenet, 5)'),
    );
  });

  it('answers before the body is sent: Expect: 100-continue and unknown models', async () => {
    const port = h.server.ports.rest!;
    const big = (path: string, expect: boolean): string =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n` +
      `${expect ? 'Expect: 100-continue\r\n' : ''}\r\n`;
    // An unknown model: 404 without asking for the 3 MB body, and the connection closes
    // because the client will not send it.
    const refused = await rawHttp(port, big('/v1/models/nope:predict', true), /Latest\(nope\)/);
    assert.match(refused, /^HTTP\/1\.1 404 /);
    assert.doesNotMatch(refused, /100 Continue/);
    assert.match(refused, /\r\nConnection: close\r\n/i);
    assert.match(refused, /"Servable not found for request: Latest\(nope\)"/);
    // Without Expect the answer comes at the headers too, while the body is still unsent.
    assert.match(
      await rawHttp(port, big('/v1/models/nope:predict', false), /Latest\(nope\)/),
      /^HTTP\/1\.1 404 /,
    );
    // A served model: 100 Continue, then the answer, and the connection stays open for more.
    const body = '{"instances": [1.0, 2.0, 5.0]}';
    const exchange = await rawHttp(
      port,
      `POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
      /100 Continue\r\n\r\n/,
      async (socket, read) => {
        socket.write(body);
        await read(/\[2\.5, ?3, ?4\.5\]/);
        socket.write(`GET /v1/models/half_plus_two HTTP/1.1\r\nHost: x\r\n\r\n`);
        await read(/AVAILABLE/);
      },
    );
    assert.match(exchange, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/);
    assert.doesNotMatch(exchange, /Connection: close/i);
    assert.match(exchange, /"predictions": ?\[2\.5, ?3, ?4\.5\]/);
    assert.match(exchange, /AVAILABLE/);
  });

  it('keeps serving after hostile requests on both protocols', async () => {
    const bad = [
      '{not json',
      '{"instances": [[1,2],[3]]}',
      `{"instances": ${'['.repeat(100000)}${']'.repeat(100000)}}`,
      '{"inputs": {"input": [[[[1]]]]}, "instances": [1]}',
    ];
    for (const body of bad) {
      const res = await fetch(`${h.rest}/v1/models/mobilenet:predict`, { method: 'POST', body });
      assert.equal(res.status, 400, body.slice(0, 40));
      assert.ok(typeof ((await res.json()) as { error: unknown }).error === 'string');
    }
    // Truncated protobuf, and a tensor with an unknown dtype enum and a huge declared shape.
    await assert.rejects(
      h.grpc.unary('/tensorflow.serving.PredictionService/Predict', new Uint8Array([0x0a, 0x10, 0x0a, 0x03])),
      (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT,
    );
    // PredictRequest{ model_spec{name:"mobilenet"}, inputs{key:"input" value:{dtype: 99}} }
    const hostile = new Uint8Array([
      0x0a,
      0x0b,
      0x0a,
      0x09,
      ...new TextEncoder().encode('mobilenet'),
      0x12,
      0x0b,
      0x0a,
      0x05,
      ...new TextEncoder().encode('input'),
      0x12,
      0x02,
      0x08,
      0x63,
    ]);
    await assert.rejects(
      h.grpc.unary('/tensorflow.serving.PredictionService/Predict', hostile),
      (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT && /99/.test(e.message),
    );
    await assert.rejects(
      grpcPredict(h.grpc, 'mobilenet', {
        input: { dtype: 'float32', shape: [1 << 20, 1 << 20, 3, 224], data: new Float32Array(0) },
      }),
      (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT,
    );
    // 36 bytes declaring a DT_STRING [2^31-1] tensor with no values: refused, not expanded.
    const expanding = create(PredictRequestSchema, {
      modelSpec: { name: 'mobilenet' },
      inputs: { input: { dtype: DataType.DT_STRING, tensorShape: { dim: [{ size: 2147483647n }] } } },
    });
    await assert.rejects(
      h.grpc.unary(
        '/tensorflow.serving.PredictionService/Predict',
        toBinary(PredictRequestSchema, expanding),
      ),
      (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT,
    );
    const { outputs } = await grpcPredict(h.grpc, 'mobilenet', { input: await catTensor() });
    assert.equal(argmax(outputs['output']!.data as Float32Array), 281);
  });

  it('keeps the event loop responsive while models run', async () => {
    // Batch-16 MobileNetV2 runs take tens of ms each. Were session.run on the main
    // thread, every run would stall the loop for that long.
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    const batch = (): Tensor => ({
      dtype: 'float32',
      shape: [16, 3, 224, 224],
      data: new Float32Array(16 * 3 * 224 * 224).fill(0.5),
    });
    histogram.enable();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: 2 }, async () => {
        for (let i = 0; i < 5; i++) await grpcPredict(h.grpc, 'mobilenet', { input: batch() });
      }),
    );
    const perRun = (performance.now() - started) / 10;
    histogram.disable();
    const p99 = histogram.percentile(99) / 1e6;
    assert.ok(perRun > 15, `a batch-16 run should take tens of ms (took ${perRun.toFixed(1)})`);
    assert.ok(
      p99 < perRun / 2,
      `event-loop delay p99 ${p99.toFixed(1)} ms vs ${perRun.toFixed(1)} ms per run`,
    );
  });
});
