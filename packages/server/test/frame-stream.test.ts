/**
 * The frame stream core with a fake InferenceService whose runs the test finishes one by one:
 * answers in frame order whatever order runs finish in, `latest` keeps only the newest waiting
 * frame, `all` pauses and resumes reading at --stream_queue_frames, unsent answers stop new
 * frames, finish() waits for the last answer, the open-stream limit, raw tensor frames in
 * order with image frames, and the counts the metrics read.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError, type Tensor, invalidArgument } from '@visionserve/protocol';
import { IMAGE_PRESETS } from '@visionserve/vision';
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import type { InferenceService, Servable } from '../src/core/inference-service.js';
import { createConcurrencyLimit } from '../src/frontends/shared/concurrency-limit.js';
import {
  type FrameAnswer,
  type FrameSink,
  type FrameStreamLimits,
  createFrameStreams,
} from '../src/frontends/stream/frame-stream.js';
import { type Deferred, createMemoryLogger, deferred, tick } from './fakes.js';
import { sharedImage } from './shared-models.js';

const JPEG = await sharedImage('cat_tabby.jpg');

const ASSETS: ServableAssets = {
  vision: { config: { image: { ...IMAGE_PRESETS.imagenet, channelOrder: 'RGB' } }, labels: undefined },
  handlerModulePath: undefined,
};

/** A service whose every predict waits for the test: `runs` in start order. */
function gatedService(): {
  service: InferenceService<ServableAssets>;
  runs: Deferred<Record<string, Tensor>>[];
} {
  const runs: Deferred<Record<string, Tensor>>[] = [];
  const servable: Servable<ServableAssets> = {
    name: 'm',
    version: 1,
    assets: ASSETS,
    signatures: {},
    admit: () => () => undefined,
    signature: () => ({
      name: 'serving_default',
      signature: {
        inputs: { input: { name: 'input', dtype: 'float32', shape: [1, 3, 224, 224] } },
        outputs: { y: { name: 'y', dtype: 'float32', shape: [1] } },
        methodName: 'tensorflow/serving/predict',
      },
    }),
    predict: () => {
      const run = deferred<Record<string, Tensor>>();
      runs.push(run);
      return run.promise;
    },
  };
  const service = {
    withServable: (_spec: unknown, fn: (s: Servable<ServableAssets>) => Promise<unknown>) => fn(servable),
    admit: () => () => undefined,
    status: () => [{ version: 1, state: 'AVAILABLE' }],
  } as unknown as InferenceService<ServableAssets>;
  return { service, runs };
}

const output = (value: number): Record<string, Tensor> => ({
  y: { dtype: 'float32', shape: [1], data: Float32Array.of(value) },
});

interface TestSink extends FrameSink {
  readonly answers: FrameAnswer[];
  readonly events: string[];
  /** The `written` callbacks not yet called, in send order. */
  readonly unwritten: (() => void)[];
}

function testSink(autoWritten = true): TestSink {
  const answers: FrameAnswer[] = [];
  const events: string[] = [];
  const unwritten: (() => void)[] = [];
  return {
    answers,
    events,
    unwritten,
    send(answer, written) {
      answers.push(answer);
      if (autoWritten) written();
      else unwritten.push(written);
    },
    pause: () => events.push('pause'),
    resume: () => events.push('resume'),
    fail: (error) => events.push(`fail ${Code[error.code]}`),
  };
}

const LIMITS: FrameStreamLimits = {
  maxOpen: 2,
  maxFrameBytes: 1 << 20,
  queueFrames: 2,
  inflightFrames: 2,
  unsentAnswers: 8,
  frameTimeoutMs: 0,
};

/** `decodes`: image decodes at once; 1 makes runs start in frame order, so runs[i] is frame i's. */
function setup(limits: Partial<FrameStreamLimits> = {}, decodes = 4) {
  const { service, runs } = gatedService();
  const streams = createFrameStreams({
    service,
    imageDecodes: createConcurrencyLimit(decodes),
    logger: createMemoryLogger(),
    limits: { ...LIMITS, ...limits },
  });
  return { streams, runs };
}

/** Waits until `n` runs have started (image decodes run in sharp's threads). */
async function started(runs: readonly unknown[], n: number): Promise<void> {
  for (let i = 0; i < 500 && runs.length < n; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(runs.length, n, `${n} runs started`);
}

const frames = (answers: readonly FrameAnswer[]): number[] => answers.map((a) => a.frame);

void describe('frame stream core', () => {
  void it('answers in frame order when runs finish out of order', async () => {
    const { streams, runs } = setup({}, 1);
    const sink = testSink();
    const stream = streams.open(
      { model: { name: 'm' }, policy: 'all', headers: {}, transport: 'http' },
      sink,
    );
    stream.push(JPEG);
    stream.push(JPEG);
    await started(runs, 2);
    runs[1]!.resolve(output(1));
    await tick();
    assert.deepEqual(frames(sink.answers), [], 'frame 1 waits for frame 0');
    runs[0]!.resolve(output(0));
    await started(runs, 2);
    for (let i = 0; i < 10 && sink.answers.length < 2; i++) await tick();
    assert.deepEqual(frames(sink.answers), [0, 1]);
    const first = sink.answers[0]!;
    assert.ok(!('error' in first));
    assert.deepEqual(
      JSON.parse(first.resultJson),
      { predictions: [0] },
      'the raw output, TF Serving row format',
    );
    stream.close();
  });

  void it('latest keeps only the newest waiting frame and counts the others as dropped', async () => {
    const { streams, runs } = setup({ inflightFrames: 1 });
    const sink = testSink();
    const stream = streams.open(
      { model: { name: 'm' }, policy: 'latest', headers: {}, transport: 'http' },
      sink,
    );
    for (let i = 0; i < 4; i++) stream.push(JPEG);
    await started(runs, 1);
    runs[0]!.resolve(output(0));
    await started(runs, 2);
    runs[1]!.resolve(output(3));
    for (let i = 0; i < 10 && sink.answers.length < 2; i++) await tick();
    assert.deepEqual(frames(sink.answers), [0, 3]);
    assert.deepEqual(
      sink.answers.map((a) => ('dropped' in a ? a.dropped : -1)),
      [2, 2],
    );
    assert.deepEqual(sink.events, [], 'latest never stops reading');
    stream.close();
  });

  void it('all pauses reading at --stream_queue_frames and resumes when the queue drains', async () => {
    const { streams, runs } = setup({ inflightFrames: 1, queueFrames: 2 });
    const sink = testSink();
    const stream = streams.open(
      { model: { name: 'm' }, policy: 'all', headers: {}, transport: 'http' },
      sink,
    );
    for (let i = 0; i < 3; i++) stream.push(JPEG);
    assert.deepEqual(sink.events, ['pause'], 'two frames wait behind the running one');
    await started(runs, 1);
    runs[0]!.resolve(output(0));
    await started(runs, 2);
    assert.deepEqual(sink.events, ['pause', 'resume']);
    runs[1]!.resolve(output(1));
    await started(runs, 3);
    runs[2]!.resolve(output(2));
    for (let i = 0; i < 10 && sink.answers.length < 3; i++) await tick();
    assert.deepEqual(frames(sink.answers), [0, 1, 2]);
    stream.close();
  });

  void it('starts no new frame while --stream_unsent_answers answers are not written out', async () => {
    const { streams, runs } = setup({ inflightFrames: 1, unsentAnswers: 1 });
    const sink = testSink(false);
    const stream = streams.open(
      { model: { name: 'm' }, policy: 'all', headers: {}, transport: 'http' },
      sink,
    );
    stream.push(JPEG);
    stream.push(JPEG);
    await started(runs, 1);
    runs[0]!.resolve(output(0));
    for (let i = 0; i < 10 && sink.answers.length < 1; i++) await tick();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(runs.length, 1, 'the client has not read answer 0: frame 1 waits');
    sink.unwritten.shift()!();
    await started(runs, 2);
    stream.close();
  });

  void it('finish() runs once every frame sent is answered; the open-stream limit counts open streams', async () => {
    const { streams, runs } = setup();
    const sink = testSink();
    const request = { model: { name: 'm' }, policy: 'all', headers: {}, transport: 'grpc' } as const;
    const stream = streams.open(request, sink);
    streams.open(request, testSink());
    assert.throws(
      () => streams.open(request, testSink()),
      (e: unknown) => e instanceof ServingError && e.code === Code.RESOURCE_EXHAUSTED,
    );
    stream.push(JPEG);
    let done = false;
    stream.finish(() => {
      done = true;
    });
    await started(runs, 1);
    assert.equal(done, false);
    runs[0]!.resolve(output(0));
    for (let i = 0; i < 10 && !done; i++) await tick();
    assert.equal(done, true);
    assert.equal(streams.size, 1, 'the finished stream is closed');
    streams.closeAll();
    assert.equal(streams.size, 0);
    assert.throws(() => streams.open(request, testSink()), /shutting down/);
  });
  void it('tensor frames keep their place among image frames; a tensor that does not decode is a per-frame error', async () => {
    const { streams, runs } = setup({ inflightFrames: 1 }, 1);
    const sink = testSink();
    const stream = streams.open(
      { model: { name: 'm' }, policy: 'all', headers: {}, transport: 'grpc' },
      sink,
    );
    const tensor: Tensor = {
      dtype: 'float32',
      shape: [1, 3, 224, 224],
      data: new Float32Array(3 * 224 * 224),
    };
    stream.pushTensor({ byteLength: 4 * 3 * 224 * 224, decode: () => tensor });
    stream.push(JPEG);
    stream.pushTensor({
      byteLength: 3,
      decode: () => {
        throw invalidArgument('Frame tensor: bad');
      },
    });
    stream.pushTensor({ byteLength: 4 * 3 * 224 * 224, decode: () => tensor });
    for (let i = 0; i < 3; i++) {
      await started(runs, i + 1);
      runs[i]!.resolve(output(i));
    }
    for (let i = 0; i < 20 && sink.answers.length < 4; i++) await tick();
    assert.deepEqual(frames(sink.answers), [0, 1, 2, 3]);
    const results = sink.answers.map((a) =>
      'error' in a ? a.error.message : (JSON.parse(a.resultJson) as unknown),
    );
    assert.deepEqual(results, [
      { predictions: [0] },
      { predictions: [1] },
      'Frame tensor: bad',
      { predictions: [2] },
    ]);
    assert.equal(streams.counts().frames.get('m')?.failed, 1);
    stream.close();
  });

  void it('counts open streams per transport and frames by outcome', async () => {
    const { streams, runs } = setup({ inflightFrames: 1, maxOpen: 3 });
    const ws = streams.open(
      { model: { name: 'm' }, policy: 'latest', headers: {}, transport: 'http' },
      testSink(),
    );
    const grpc = streams.open(
      { model: { name: 'm' }, policy: 'all', headers: {}, transport: 'grpc' },
      testSink(),
    );
    assert.deepEqual(
      [...streams.counts().open],
      [
        ['websocket', 1],
        ['grpc', 1],
      ],
    );
    for (let i = 0; i < 4; i++) ws.push(JPEG);
    grpc.push(new Uint8Array(0));
    await started(runs, 1);
    runs[0]!.resolve(output(0));
    await started(runs, 2);
    runs[1]!.resolve(output(1));
    for (let i = 0; i < 20 && streams.counts().frames.get('m')?.answered !== 2; i++) await tick();
    assert.deepEqual(streams.counts().frames.get('m'), { answered: 2, dropped: 2, failed: 1 });
    ws.close();
    grpc.close();
    ws.close();
    assert.deepEqual(
      [...streams.counts().open],
      [
        ['websocket', 0],
        ['grpc', 0],
      ],
    );
  });
});
