/**
 * @visionserve/client against the real server (real models from ../shared): gRPC and REST.
 * The /invocations client is tested against a stub of the container contract in the client
 * package (the SageMaker-style frontend is not on this branch yet).
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  Code,
  ServingError,
  type Tensor,
  type TfsGrpcClient,
  type TfsRestClient,
  createTfsGrpcClient,
  createTfsRestClient,
  predictBatched,
  tensor,
  classifyTopK,
  decodeDetections,
} from '@visionserve/client';
import { IMAGE_PRESETS, imageToTensor } from '@visionserve/client/image';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { image, imagenetLabels, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startHarness, type Harness } from './helpers/server-harness.js';

const isCode = (code: Code) => (e: unknown) => e instanceof ServingError && e.code === code;

describe('@visionserve/client against a real server', () => {
  let h: Harness;
  let grpc: TfsGrpcClient;
  let rest: TfsRestClient;
  let root: string;
  let cat: Tensor;
  before(async () => {
    root = await tempRepo();
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    await placeModel(root, 'detector', 1, sharedModel('yolox_nano_tfod.onnx'));
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    await writeFile(
      join(root, 'models.config'),
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'detector' base_path: 'detector' }
      }`,
    );
    h = await startHarness({ modelConfigFile: join(root, 'models.config'), fileSystemPollSeconds: 0 });
    grpc = createTfsGrpcClient({ address: `127.0.0.1:${h.server.ports.grpc!}`, defaultTimeoutMs: 30_000 });
    rest = createTfsRestClient({ baseUrl: h.rest, defaultTimeoutMs: 30_000 });
    cat = (await imageToTensor(image('cat_tabby.jpg'), IMAGE_PRESETS.imagenet)).tensor;
  });
  after(async () => {
    grpc.close();
    rest.close();
    await h.close();
  });

  it('gRPC Predict classifies the tabby cat with tensor_content and with typed values', async () => {
    for (const encoding of ['tensor_content', 'typed'] as const) {
      const r = await grpc.predict('mobilenet', { input: cat }, { encoding });
      assert.equal(r.model.version, 1);
      assert.deepEqual(r.outputs['output']!.shape, [1, 1000]);
      const labels = new Map(imagenetLabels().map((l, i) => [i, l]));
      const [top] = classifyTopK(r.outputs['output']!, { kind: 'classification', topK: 1 }, labels);
      assert.equal(top![0]!.class_id, 281);
      assert.match(top![0]!.label!, /tabby/);
      assert.ok(r.wire.requestBytes > 600_000 && r.wire.responseBytes > 4000);
    }
  });

  it('gRPC Predict honours output_filter on the detector', async () => {
    const soccer = (await imageToTensor(image('scene_soccer.jpg'), IMAGE_PRESETS.tfod)).tensor;
    const all = await grpc.predict('detector', { input_tensor: soccer });
    const [found] = decodeDetections(
      all.outputs,
      { kind: 'detection', scoreThreshold: 0.5 },
      undefined,
      undefined,
    );
    assert.deepEqual(
      found!.detections.map((d) => d.class_id).sort((a, b) => a - b),
      [1, 1, 1, 37],
    );
    const some = await grpc.predict(
      'detector',
      { input_tensor: soccer },
      { outputFilter: ['num_detections'] },
    );
    assert.deepEqual(Object.keys(some.outputs), ['num_detections']);
  });

  it('gRPC GetModelMetadata and GetModelStatus', async () => {
    const meta = await grpc.getModelMetadata('mobilenet');
    assert.equal(meta.model.version, 1);
    const sig = meta.signatures['serving_default']!;
    assert.deepEqual(sig.inputs['input'], {
      name: 'input',
      dtype: 'float32',
      tfDtype: 'DT_FLOAT',
      shape: [-1, 3, 224, 224],
    });
    assert.equal(sig.methodName, 'tensorflow/serving/predict');
    const status = await grpc.getModelStatus('detector');
    assert.deepEqual(status, [{ version: 1, state: 'AVAILABLE', errorCode: Code.OK, errorMessage: '' }]);
    await assert.rejects(grpc.getModelStatus('nope'), isCode(Code.NOT_FOUND));
    await assert.rejects(grpc.predict('mobilenet', { wrong: cat }), isCode(Code.INVALID_ARGUMENT));
  });

  it('REST predict (row and columnar), status and metadata', async () => {
    for (const format of ['row', 'columnar'] as const) {
      const r = await rest.predict('mobilenet', { input: cat }, { format });
      assert.deepEqual(r.outputs['output']!.shape, [1, 1000]);
      assert.equal(
        classifyTopK(r.outputs['output']!, { kind: 'classification', topK: 1 }, undefined)[0]![0]!.class_id,
        281,
      );
    }
    const meta = await rest.getModelMetadata({ name: 'detector', version: 1 });
    assert.deepEqual(Object.keys(meta.signatures['serving_default']!.outputs).sort(), [
      'detection_boxes',
      'detection_classes',
      'detection_scores',
      'num_detections',
    ]);
    assert.deepEqual(await rest.getModelStatus('mobilenet'), [
      { version: 1, state: 'AVAILABLE', errorCode: Code.OK, errorMessage: '' },
    ]);
    await assert.rejects(rest.getModelStatus({ name: 'mobilenet', version: 7 }), isCode(Code.NOT_FOUND));
  });

  it('client-side batching stacks three images into one request and splits the answers', async () => {
    const dog = (await imageToTensor(image('dog_beagle.jpg'), IMAGE_PRESETS.imagenet)).tensor;
    const items = [{ input: cat }, { input: dog }, { input: cat }];
    for (const client of [grpc, rest]) {
      const results = await predictBatched(client, 'mobilenet', items, { maxBatchSize: 8 });
      assert.deepEqual(
        results.map(
          (r) => classifyTopK(r['output']!, { kind: 'classification', topK: 1 }, undefined)[0]![0]!.class_id,
        ),
        [281, 162, 281],
      );
      assert.deepEqual(results[1]!['output']!.shape, [1, 1000]);
    }
  });

  it('deadlines reach the server and come back as DEADLINE_EXCEEDED', async () => {
    await assert.rejects(
      grpc.predict('mobilenet', { input: cat }, { timeoutMs: 1 }),
      isCode(Code.DEADLINE_EXCEEDED),
    );
    await assert.rejects(
      rest.predict('mobilenet', { input: cat }, { timeoutMs: 1 }),
      isCode(Code.DEADLINE_EXCEEDED),
    );
  });

  it('HandleReloadConfigRequest replaces the model set', async () => {
    await grpc.reloadConfig([
      { name: 'mobilenet', basePath: join(root, 'mobilenet') },
      { name: 'half_plus_two', basePath: join(root, 'half_plus_two'), versionPolicy: { latest: 1 } },
    ]);
    const r = await grpc.predict('half_plus_two', { x: tensor(new Float32Array([1, 2, 3])) });
    assert.deepEqual(Array.from(r.outputs['y']!.data as Float32Array), [2.5, 3, 3.5]);
    await assert.rejects(grpc.getModelStatus('detector'), isCode(Code.NOT_FOUND));
    await assert.rejects(grpc.reloadConfig([{ name: '', basePath: '/x' }]), isCode(Code.INVALID_ARGUMENT));
    // A new model with no loadable version: TF Serving answers UNKNOWN naming it; the rest is served.
    await assert.rejects(
      grpc.reloadConfig([
        { name: 'mobilenet', basePath: join(root, 'mobilenet') },
        { name: 'half_plus_two', basePath: join(root, 'half_plus_two'), versionPolicy: { latest: 1 } },
        { name: 'ghost', basePath: join(root, 'no-such-dir') },
      ]),
      (e: unknown) =>
        isCode(Code.UNKNOWN)(e) &&
        (e as Error).message.includes(
          '1 model(s) did not become available: {{{name: ghost} due to error: No versions',
        ),
    );
    const still = await grpc.predict('half_plus_two', { x: tensor(new Float32Array([1])) });
    assert.deepEqual(Array.from(still.outputs['y']!.data as Float32Array), [2.5]);
  });
});
