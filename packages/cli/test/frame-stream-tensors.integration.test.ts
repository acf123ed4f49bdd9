/**
 * Raw tensor frames on the gRPC frame stream (visionserve.stream.FrameTensor) and the frame
 * stream metrics, on a real server with real models over real sockets: MobileNetV2 fed the
 * preprocessed tensor of a photo answers as the image frame does and as raw onnxruntime ranks
 * it; hostile tensors are per-frame errors while the stream goes on; image and tensor frames
 * mixed in one stream keep frame order; a detector's tensor frame gives the image frame's
 * boxes; a model without an image config answers its raw outputs; the open-stream gauge and
 * the frame counters move during streams and the gauge returns to 0 after they close.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Tensor } from '@visionserve/protocol';
import { frameTensorOf } from '@visionserve/protocol/stream-proto';
import {
  type ClassScore,
  MOBILENET_V2_VISION_CONFIG,
  TFOD_DETECTOR_VISION_CONFIG,
} from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { allScores, assertSameTopK, runReference } from './helpers/reference.js';
import { image, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { placeDetector, placeMobilenet, request } from './helpers/sagemaker-models.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { openStream, sleep } from './helpers/stream-client.js';
import { type GrpcFrameCall, openGrpcFrameCall } from './helpers/grpc-frame-client.js';

const CAT = image('cat_tabby.jpg');
const DOG = image('dog_beagle.jpg');
const SOCCER = image('scene_soccer.jpg');
/** --stream_max_frame_bytes here: MobileNetV2's FP32 tensor is 602,112 bytes, YOLOX's uint8 one of the soccer scene 3.3 MB. */
const MAX_FRAME_BYTES = 4 * 1024 * 1024;

type Classes = { predictions: ClassScore[][] };

/** The answers of a call that sent its frames and half-closed; asserts it ended OK. */
async function finished(call: GrpcFrameCall): Promise<GrpcFrameCall['answers']> {
  call.end();
  assert.deepEqual(await call.status, { code: 0, message: '' });
  return call.answers;
}

/** A FrameTensor whose contents are `bytes` zero bytes, for hostile frames. */
function rawTensor(datatype: string, shape: readonly number[], bytes: number) {
  return { datatype, shape: shape.map((d) => BigInt(d)), rawContents: new Uint8Array(bytes) };
}

/** Parses a Prometheus text exposition: the value of `name` with exactly these labels (0 when absent). */
function metricValue(text: string, name: string, labels: Readonly<Record<string, string>>): number {
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)) found[l[1]!] = l[2]!;
    if (
      Object.keys(found).length === Object.keys(labels).length &&
      Object.entries(labels).every(([k, v]) => found[k] === v)
    )
      return Number(m[3]);
  }
  return 0;
}

describe('raw tensor frames on the gRPC frame stream, and frame stream metrics', () => {
  let root: string;
  let h: Harness;
  let port: number;
  let catTensor: Tensor;
  let dogTensor: Tensor;
  const scrape = async (): Promise<string> => (await fetch(`${h.rest}/monitoring/prometheus/metrics`)).text();
  /** visionserve_frame_streams_open{transport} once it equals `want` (or after 10 s: a loaded machine). */
  const openStreams = async (transport: string, want = 0): Promise<number> => {
    let open = metricValue(await scrape(), 'visionserve_frame_streams_open', { transport });
    for (let i = 0; i < 500 && open !== want; i++) {
      await sleep(20);
      open = metricValue(await scrape(), 'visionserve_frame_streams_open', { transport });
    }
    return open;
  };
  const invocation = async (model: string, body: Buffer): Promise<unknown> =>
    (
      await request(`${h.sagemaker}/invocations`, {
        body,
        headers: {
          'Content-Type': 'application/x-image',
          'X-Amzn-SageMaker-Custom-Attributes': `tfs-model-name=${model}`,
        },
      })
    ).json();

  before(async () => {
    root = await tempRepo('vs-stream-tensors-');
    await placeMobilenet(root, 'mobilenet');
    await placeDetector(root, 'detector');
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'detector' base_path: 'detector' }
        config { name: 'half_plus_two' base_path: 'half_plus_two' }
      }`,
    );
    const monitoring = join(root, 'monitoring.config');
    await writeFile(
      monitoring,
      'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n',
    );
    h = await startHarness({
      modelConfigFile: config,
      monitoringConfigFile: monitoring,
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      sagemakerDefaultModelName: 'mobilenet',
      instances: 1,
      streamMaxFrameBytes: MAX_FRAME_BYTES,
    });
    port = h.server.ports.grpc!;
    catTensor = (await imageToTensor(CAT, MOBILENET_V2_VISION_CONFIG.image)).tensor;
    dogTensor = (await imageToTensor(DOG, MOBILENET_V2_VISION_CONFIG.image)).tensor;
  });
  after(async () => {
    await h.close();
  });

  it('MobileNetV2 fed the preprocessed tensor answers as the image frame and as raw onnxruntime rank it', async () => {
    const call = openGrpcFrameCall(port);
    call.send({ modelName: 'mobilenet', policy: 'all' });
    call.send({ image: CAT });
    call.send({ tensor: frameTensorOf(catTensor) });
    const [fromImage, fromTensor] = await finished(call);
    assert.equal(fromTensor!.error, undefined);
    assert.equal(Number(fromTensor!.frame), 1);
    assert.equal(fromTensor!.modelVersion, '1');
    const served = JSON.parse(fromTensor!.resultJson) as Classes;
    assert.deepEqual(served, JSON.parse(fromImage!.resultJson));
    assert.equal(served.predictions[0]![0]!.class_id, 281);
    const out = await runReference(sharedModel('mobilenetv2-12-int8.onnx'), { input: catTensor });
    assertSameTopK(served.predictions[0]!, allScores(out['output']!, { softmax: true }));
  });

  it('answers hostile tensors with clear per-frame errors while the stream goes on', async () => {
    const call = openGrpcFrameCall(port);
    call.send({ modelName: 'mobilenet', policy: 'all' });
    const cases: [string, Parameters<GrpcFrameCall['send']>[0], RegExp | undefined][] = [
      ['good', { tensor: frameTensorOf(catTensor) }, undefined],
      [
        'wrong dtype',
        { tensor: rawTensor('UINT8', [1, 3, 224, 224], 3 * 224 * 224) },
        /expected dtype float32, got uint8/,
      ],
      [
        'wrong shape',
        { tensor: rawTensor('FP32', [1, 3, 112, 112], 4 * 3 * 112 * 112) },
        /expected shape \[.*3,224,224\], got \[1,3,112,112\]/,
      ],
      [
        'short bytes',
        { tensor: rawTensor('FP32', [1, 3, 224, 224], 1000) },
        /1000 bytes of binary data, but FP32 shape \[1,3,224,224\] takes 602112/,
      ],
      ['negative dim', { tensor: rawTensor('FP32', [1, -3, 224, 224], 0) }, /invalid dimension -3/],
      ['huge shape', { tensor: rawTensor('FP32', [1e6, 1e6, 1e6, 3], 16) }, /too many elements/],
      ['unknown datatype', { tensor: rawTensor('FLOAT', [1, 3, 224, 224], 0) }, /unknown datatype "FLOAT"/],
      ['image and tensor', { image: CAT, tensor: frameTensorOf(catTensor) }, /image or tensor, not both/],
      ['good again', { tensor: frameTensorOf(catTensor) }, undefined],
    ];
    for (const [, frame] of cases) call.send(frame);
    const answers = await finished(call);
    assert.equal(answers.length, cases.length);
    for (const [i, [what, , error]] of cases.entries()) {
      const a = answers[i]!;
      assert.equal(Number(a.frame), i, what);
      if (error === undefined) {
        assert.equal(a.error, undefined, what);
        assert.equal((JSON.parse(a.resultJson) as Classes).predictions[0]![0]!.class_id, 281, what);
      } else {
        assert.equal(a.error?.code, 'INVALID_ARGUMENT', what);
        assert.match(a.error.message, error, what);
      }
    }
  });

  it('a tensor over --stream_max_frame_bytes ends the call RESOURCE_EXHAUSTED, as an image over it does', async () => {
    for (const bytes of [MAX_FRAME_BYTES + 100, MAX_FRAME_BYTES + 64 * 1024]) {
      const call = openGrpcFrameCall(port);
      call.send({ modelName: 'mobilenet', policy: 'all' });
      call.send({ tensor: frameTensorOf(catTensor) });
      await call.answered(1);
      call.send({ tensor: rawTensor('UINT8', [bytes], bytes) });
      const status = await call.status;
      assert.equal(status.code, 8, `${bytes} bytes: ${status.message}`);
      assert.equal((JSON.parse(call.answers[0]!.resultJson) as Classes).predictions[0]![0]!.class_id, 281);
    }
    // Both calls' streams are closed on the server (a call the transport ends is not left open).
    assert.equal(await openStreams('grpc'), 0);
  });

  it('keeps frame order with image and tensor frames mixed in one stream', async () => {
    const expected = { cat: await invocation('mobilenet', CAT), dog: await invocation('mobilenet', DOG) };
    const call = openGrpcFrameCall(port);
    call.send({ modelName: 'mobilenet', policy: 'all' });
    const kinds = ['cat image', 'dog tensor', 'cat tensor', 'dog image', 'bad image', 'bad tensor'];
    const sent = Array.from({ length: 18 }, (_, i) => kinds[i % kinds.length]!);
    for (const kind of sent) {
      if (kind === 'bad image') call.send({ image: Buffer.from('not an image') });
      else if (kind === 'bad tensor') call.send({ tensor: rawTensor('FP32', [1, 3, 224, 224], 12) });
      else if (kind.endsWith('image')) call.send({ image: kind.startsWith('cat') ? CAT : DOG });
      else call.send({ tensor: frameTensorOf(kind.startsWith('cat') ? catTensor : dogTensor) });
    }
    const answers = await finished(call);
    assert.deepEqual(
      answers.map((a) => Number(a.frame)),
      sent.map((_, i) => i),
    );
    for (const [i, kind] of sent.entries()) {
      const a = answers[i]!;
      if (kind.startsWith('bad')) {
        assert.equal(a.error?.code, 'INVALID_ARGUMENT', kind);
        continue;
      }
      assert.deepEqual(JSON.parse(a.resultJson), kind.startsWith('cat') ? expected.cat : expected.dog, kind);
    }
  });

  it("a detector's tensor frame gives the image frame's boxes (box_pixels in the tensor's pixels)", async () => {
    const { tensor } = await imageToTensor(SOCCER, TFOD_DETECTOR_VISION_CONFIG.image);
    const call = openGrpcFrameCall(port);
    call.send({ modelName: 'detector', policy: 'all' });
    call.send({ image: SOCCER });
    call.send({ tensor: frameTensorOf(tensor) });
    const [fromImage, fromTensor] = await finished(call);
    const result = JSON.parse(fromTensor!.resultJson) as {
      predictions: { detections: { label: string; box_pixels: { xmax: number; ymax: number } }[] }[];
    };
    assert.deepEqual(result, JSON.parse(fromImage!.resultJson));
    const labels = new Set(result.predictions[0]!.detections.map((d) => d.label));
    assert.ok(labels.has('person'), [...labels].join(', '));
    const [height, width] = [tensor.shape[1]!, tensor.shape[2]!];
    for (const d of result.predictions[0]!.detections) {
      assert.ok(d.box_pixels.xmax <= width && d.box_pixels.ymax <= height);
    }
  });

  it('a model without an image config answers a tensor frame with its raw outputs (TF Serving rows)', async () => {
    const x: Tensor = { dtype: 'float32', shape: [3], data: new Float32Array([1, 2, 3]) };
    const predict = await request(`${h.rest}/v1/models/half_plus_two:predict`, {
      body: JSON.stringify({ instances: [1, 2, 3] }),
      headers: { 'Content-Type': 'application/json' },
    });
    const call = openGrpcFrameCall(port);
    call.send({ modelName: 'half_plus_two', policy: 'all', tensor: frameTensorOf(x) });
    call.send({ image: CAT });
    const [tensorAnswer, imageAnswer] = await finished(call);
    assert.deepEqual(JSON.parse(tensorAnswer!.resultJson), predict.json());
    assert.equal(imageAnswer!.error?.code, 'FAILED_PRECONDITION');
  });

  it('counts open streams per transport and frames by outcome; the gauge returns to 0 after close', async () => {
    const frames = (outcome: string): Promise<number> =>
      scrape().then((t) =>
        metricValue(t, 'visionserve_frame_stream_frames_total', { model: 'mobilenet', outcome }),
      );
    const before = {
      answered: await frames('answered'),
      dropped: await frames('dropped'),
      failed: await frames('failed'),
    };
    const ws = await openStream(h.rest, 'mobilenet/stream?policy=all');
    const grpc = openGrpcFrameCall(port);
    grpc.send({ modelName: 'mobilenet' }); // policy latest
    // The gRPC stream opens with its first message: wait until the server has it.
    assert.equal(await openStreams('grpc', 1), 1);
    assert.equal(await openStreams('websocket', 1), 1);
    for (const f of [CAT, Buffer.from('garbage'), DOG]) ws.ws.send(f);
    // Sent at once with `latest`: the frames waiting behind the ones running are dropped.
    const sent = 20;
    for (let i = 0; i < sent; i++) grpc.send({ tensor: frameTensorOf(catTensor) });
    await ws.until(2);
    const answers = await finished(grpc);
    const dropped = Number(answers.at(-1)!.dropped);
    assert.ok(dropped > 0, `latest dropped frames (${answers.length} answered of ${sent})`);
    assert.equal(answers.length + dropped, sent);
    assert.equal((await frames('answered')) - before.answered, 2 + answers.length, 'answered');
    assert.equal((await frames('failed')) - before.failed, 1, 'failed');
    assert.equal((await frames('dropped')) - before.dropped, dropped, 'dropped');
    ws.ws.close(1000);
    await ws.closed;
    assert.equal(await openStreams('websocket'), 0);
    assert.equal(await openStreams('grpc'), 0);
    const after = await scrape();
    assert.match(after, /# TYPE visionserve_frame_streams_open gauge/);
    assert.match(after, /# TYPE visionserve_frame_stream_frames_total counter/);
  });
});
