import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import { createBatchScheduler, QUEUE_FULL_MESSAGE } from '../src/batching/batch-scheduler.js';
import {
  type BatchingParametersInput,
  defaultBatchingParameters,
  resolveBatchingParameters,
} from '../src/batching/batching-parameters.js';
import { createBatchingSession } from '../src/batching/batching-session.js';
import { createBatchingStats } from '../src/batching/batching-stats.js';
import type { RunOptions, Session } from '../src/core/session.js';
import type { Signature } from '../src/core/signature.js';
import { silentLogger } from '../src/util/logger.js';
import { type Deferred, deferred, sleep } from './fakes.js';

/** y = 2x row by row; "sum" = per-row sum. Records every run it receives. */
interface RecordingSession extends Session {
  readonly runs: { shape: number[]; data: number[]; outputNames: readonly string[] | undefined }[];
  gate: Deferred | undefined;
  active: number;
  maxActive: number;
}

const SIGNATURE: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1, -1] } },
  outputs: {
    y: { name: 'y', dtype: 'float32', shape: [-1, -1] },
    sum: { name: 'sum', dtype: 'float32', shape: [-1] },
  },
  methodName: 'tensorflow/serving/predict',
};

function recordingSession(signature: Signature = SIGNATURE): RecordingSession {
  const s: RecordingSession = {
    signature,
    runs: [],
    gate: undefined,
    active: 0,
    maxActive: 0,
    async run(inputs: Readonly<Record<string, Tensor>>, options?: RunOptions) {
      const x = inputs['x']!;
      const data = x.data as Float32Array;
      s.runs.push({ shape: [...x.shape], data: [...data], outputNames: options?.outputNames });
      s.active++;
      s.maxActive = Math.max(s.maxActive, s.active);
      try {
        await s.gate?.promise;
        const cols = x.shape[1]!;
        const y = data.map((v) => v * 2);
        const sum = new Float32Array(x.shape[0]!);
        for (let r = 0; r < x.shape[0]!; r++) for (let c = 0; c < cols; c++) sum[r]! += data[r * cols + c]!;
        const all: Record<string, Tensor> = {
          y: { dtype: 'float32', shape: [...x.shape], data: y },
          sum: { dtype: 'float32', shape: [x.shape[0]!], data: sum },
        };
        options?.onExecution?.({ computeMs: 1 });
        options?.onTimings?.({ queueMs: 0.5, computeMs: 1, batchSize: x.shape[0]! });
        const wanted = options?.outputNames;
        return wanted === undefined ? all : Object.fromEntries(wanted.map((n) => [n, all[n]!]));
      } finally {
        s.active--;
      }
    },
    close: () => Promise.resolve(),
  };
  return s;
}

function rows(values: number[][]): Tensor {
  return {
    dtype: 'float32',
    shape: [values.length, values[0]!.length],
    data: Float32Array.from(values.flat()),
  };
}

function setup(params: BatchingParametersInput, numBatchThreads = 1, signature?: Signature) {
  const inner = recordingSession(signature);
  const scheduler = createBatchScheduler({ numBatchThreads, logger: silentLogger });
  const stats = createBatchingStats();
  const parameters = resolveBatchingParameters(defaultBatchingParameters(numBatchThreads), [params]);
  const session = createBatchingSession(inner, {
    parameters,
    scheduler,
    logger: silentLogger,
    registerCounters: (q) => stats.register('m', 1, q),
  });
  return { inner, session, stats };
}

const isCode =
  (code: Code, message?: RegExp) =>
  (error: unknown): boolean => {
    assert.ok(error instanceof ServingError, `not a ServingError: ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (message) assert.match(error.message, message);
    return true;
  };

const values = (t: Tensor | undefined): number[] => [...(t!.data as Float32Array)];

void describe('batching session (fake session)', () => {
  void it('merges concurrent requests into one batch and gives each caller its own rows', async () => {
    const { inner, session, stats } = setup({ maxBatchSize: 8 });
    const [a, b, c] = await Promise.all([
      session.run({ x: rows([[1, 2]]) }),
      session.run({
        x: rows([
          [3, 4],
          [5, 6],
        ]),
      }),
      session.run({ x: rows([[7, 8]]) }),
    ]);
    assert.equal(inner.runs.length, 1);
    assert.deepEqual(inner.runs[0]!.shape, [4, 2]);
    assert.deepEqual(values(a['y']), [2, 4]);
    assert.deepEqual(a['y']!.shape, [1, 2]);
    assert.deepEqual(values(b['y']), [6, 8, 10, 12]);
    assert.deepEqual(values(b['sum']), [7, 11]);
    assert.deepEqual(values(c['sum']), [15]);
    const snap = stats.snapshot()[0]!;
    assert.equal(snap.batches, 1);
    assert.equal(snap.tasks, 3);
    assert.deepEqual(snap.batchSizes, { 4: 1 });
  });

  void it("refuses inputs the inner session's checkInputs refuses before merging: the rest of the batch runs", async () => {
    const inner = recordingSession();
    const refusing: Session = {
      ...inner,
      run: (inputs, options) => inner.run(inputs, options),
      checkInputs(inputs) {
        if ((inputs['x']!.data as Float32Array).includes(-1))
          throw new ServingError(Code.INVALID_ARGUMENT, 'no -1');
      },
    };
    const session = createBatchingSession(refusing, {
      parameters: resolveBatchingParameters(defaultBatchingParameters(1), [{ maxBatchSize: 8 }]),
      scheduler: createBatchScheduler({ numBatchThreads: 1, logger: silentLogger }),
      logger: silentLogger,
    });
    assert.ok(session.checkInputs !== undefined);
    const [a, bad, c] = await Promise.allSettled([
      session.run({ x: rows([[1, 2]]) }),
      session.run({ x: rows([[-1, 2]]) }),
      session.run({ x: rows([[3, 4]]) }),
    ]);
    assert.equal(a.status, 'fulfilled');
    assert.equal(c.status, 'fulfilled');
    assert.equal(bad.status, 'rejected');
    isCode(Code.INVALID_ARGUMENT, /no -1/)(bad.reason);
    assert.equal(inner.runs.length, 1);
    assert.deepEqual(inner.runs[0]!.data, [1, 2, 3, 4]);
  });

  void it('reports each merged run once (to one request) with its batch size, and timings to every request', async () => {
    const { session } = setup({ maxBatchSize: 8, allowedBatchSizes: [4, 8] });
    const executions: { who: string; batchSize: number | undefined }[] = [];
    const timings: string[] = [];
    const options = (who: string): RunOptions => ({
      onExecution: (e) => executions.push({ who, batchSize: e.batchSize }),
      onTimings: (t) => {
        assert.ok(t.queueMs >= 0.5 && t.computeMs === 1);
        timings.push(who);
      },
    });
    await Promise.all([
      session.run({ x: rows([[1, 2]]) }, options('a')),
      session.run({ x: rows([[3, 4]]) }, options('b')),
      session.run({ x: rows([[5, 6]]) }, { onTimings: options('c').onTimings }),
    ]);
    // Three rows padded to the allowed size 4, in one run: one report, to the first listener.
    assert.deepEqual(executions, [{ who: 'a', batchSize: 4 }]);
    assert.deepEqual(timings.sort(), ['a', 'b', 'c']);
    // Separate runs are reported separately.
    await session.run({ x: rows([[1, 2]]) }, options('d'));
    await session.run({ x: rows([[1, 2]]) }, options('e'));
    assert.deepEqual(
      executions.map((e) => e.who),
      ['a', 'd', 'e'],
    );
  });

  void it('passes sessions without a dynamic batch dimension through unchanged', () => {
    const fixed: Signature = { ...SIGNATURE, inputs: { x: { name: 'x', dtype: 'float32', shape: [1, 2] } } };
    const { inner, session } = setup({}, 1, fixed);
    assert.equal(session, inner);
  });

  void it('batch_timeout_micros: a partial batch waits for the timeout, then runs', async () => {
    // Generous timeout: the assertions only need the second request to arrive before it expires.
    const { inner, session } = setup({ maxBatchSize: 8, batchTimeoutMicros: 300_000 });
    const t0 = performance.now();
    const first = session.run({ x: rows([[1, 1]]) });
    await sleep(5);
    assert.equal(inner.runs.length, 0, 'a partial batch does not run before its timeout');
    const second = session.run({ x: rows([[2, 2]]) });
    await Promise.all([first, second]);
    const waited = performance.now() - t0;
    assert.equal(inner.runs.length, 1, 'both requests in one batch');
    assert.deepEqual(inner.runs[0]!.shape, [2, 2]);
    assert.ok(waited >= 290, `ran after ${waited.toFixed(1)} ms, before the 300 ms timeout`);
  });

  void it('a full batch runs without waiting for the timeout', async () => {
    const { inner, session } = setup({ maxBatchSize: 2, batchTimeoutMicros: 60_000_000 });
    const t0 = performance.now();
    await Promise.all([session.run({ x: rows([[1, 1]]) }), session.run({ x: rows([[2, 2]]) })]);
    assert.equal(inner.runs.length, 1);
    assert.ok(performance.now() - t0 < 30_000, 'did not wait for the 60 s timeout');
  });

  void it('max_enqueued_batches: a full queue rejects with UNAVAILABLE and TF Serving message', async () => {
    const { inner, session, stats } = setup({ maxBatchSize: 1, maxEnqueuedBatches: 2 });
    inner.gate = deferred();
    const running = session.run({ x: rows([[1, 1]]) });
    while (inner.runs.length === 0) await sleep(1);
    const queued = [session.run({ x: rows([[2, 2]]) }), session.run({ x: rows([[3, 3]]) })];
    await assert.rejects(
      session.run({ x: rows([[4, 4]]) }),
      isCode(Code.UNAVAILABLE, new RegExp(`^${QUEUE_FULL_MESSAGE}$`)),
    );
    assert.equal(stats.snapshot()[0]!.queuedTasks, 2);
    inner.gate.resolve();
    const done = await Promise.all([running, ...queued]);
    assert.deepEqual(
      done.map((o) => values(o['sum'])),
      [[2], [4], [6]],
    );
    assert.equal(stats.snapshot()[0]!.rejectedFull, 1);
  });

  void it('rejects a request larger than max_batch_size with INVALID_ARGUMENT when splitting is off', async () => {
    const { inner, session } = setup({ maxBatchSize: 4 });
    await assert.rejects(
      session.run({
        x: rows([
          [1, 1],
          [2, 2],
          [3, 3],
          [4, 4],
          [5, 5],
        ]),
      }),
      isCode(Code.INVALID_ARGUMENT, /^Task size 5 is larger than maximum input batch size 4/),
    );
    assert.equal(inner.runs.length, 0);
  });

  void it('enable_large_batch_splitting: splits a large request over execution batches and reassembles it', async () => {
    const { inner, session } = setup({
      maxBatchSize: 16,
      enableLargeBatchSplitting: true,
      maxExecutionBatchSize: 3,
      allowedBatchSizes: [2, 3],
    });
    const input = Array.from({ length: 7 }, (_, i) => [i, 10 * i]);
    const small = session.run({ x: rows([[100, 100]]) });
    const out = await session.run({ x: rows(input) });
    await small;
    assert.deepEqual(out['y']!.shape, [7, 2]);
    assert.deepEqual(
      values(out['y']),
      input.flat().map((v) => v * 2),
    );
    assert.ok(
      inner.runs.every((r) => r.shape[0]! <= 3),
      `runs ${inner.runs.map((r) => r.shape[0]).join(',')}`,
    );
    assert.equal(inner.runs.reduce((n, r) => n + r.shape[0]!, 0) >= 8, true);
    await assert.rejects(
      session.run({ x: rows(Array.from({ length: 17 }, () => [1, 1])) }),
      isCode(Code.INVALID_ARGUMENT, /Task size 17 is larger than maximum input batch size 16/),
    );
  });

  void it('allowed_batch_sizes: pads with a real row and never returns padding rows', async () => {
    const { inner, session, stats } = setup({ maxBatchSize: 8, allowedBatchSizes: [4, 8] });
    const outs = await Promise.all([
      session.run({ x: rows([[1, 2]]) }),
      session.run({ x: rows([[3, 4]]) }),
      session.run({ x: rows([[5, 6]]) }),
    ]);
    assert.equal(inner.runs.length, 1);
    assert.deepEqual(inner.runs[0]!.shape, [4, 2]);
    assert.deepEqual(inner.runs[0]!.data, [1, 2, 3, 4, 5, 6, 5, 6]);
    assert.deepEqual(
      outs.map((o) => [o['y']!.shape, values(o['y'])]),
      [
        [
          [1, 2],
          [2, 4],
        ],
        [
          [1, 2],
          [6, 8],
        ],
        [
          [1, 2],
          [10, 12],
        ],
      ],
    );
    const snap = stats.snapshot()[0]!;
    assert.equal(snap.paddingRows, 1);
    assert.deepEqual(snap.batchSizes, { 4: 1 });
  });

  void it('drops a cancelled or expired request from the queue before it runs', async () => {
    const { inner, session, stats } = setup({ maxBatchSize: 1, maxEnqueuedBatches: 10 });
    inner.gate = deferred();
    const running = session.run({ x: rows([[1, 1]]) });
    while (inner.runs.length === 0) await sleep(1);
    const controller = new AbortController();
    const cancelled = session.run({ x: rows([[-7, -7]]) }, { signal: controller.signal });
    const expired = session.run({ x: rows([[-9, -9]]) }, { signal: AbortSignal.timeout(10) });
    const kept = session.run({ x: rows([[3, 3]]) });
    const cancelledCheck = assert.rejects(cancelled, isCode(Code.CANCELLED));
    const expiredCheck = assert.rejects(expired, isCode(Code.DEADLINE_EXCEEDED));
    controller.abort();
    await sleep(30); // AbortSignal.timeout's timer does not keep the event loop alive
    await cancelledCheck;
    await expiredCheck;
    inner.gate.resolve();
    await Promise.all([running, kept]);
    const seen = inner.runs.flatMap((r) => r.data);
    assert.ok(!seen.includes(-7) && !seen.includes(-9), `ran ${seen.join(',')}`);
    assert.equal(inner.runs.length, 2);
    assert.equal(stats.snapshot()[0]!.droppedCancelled, 2);
  });

  void it('does not merge requests whose inner shapes or output filters differ', async () => {
    const { inner, session } = setup({ maxBatchSize: 8 });
    const [a, b, c] = await Promise.all([
      session.run({ x: rows([[1, 2]]) }),
      session.run({ x: rows([[1, 2, 3]]) }),
      session.run({ x: rows([[4, 5]]) }, { outputNames: ['sum'] }),
    ]);
    assert.equal(inner.runs.length, 3);
    assert.deepEqual(values(a['y']), [2, 4]);
    assert.deepEqual(values(b['y']), [2, 4, 6]);
    assert.deepEqual(Object.keys(c), ['sum']);
    assert.deepEqual(values(c['sum']), [9]);
  });

  void it('pad_variable_length_inputs: pads inner dimensions with the first element and merges', async () => {
    const { inner, session } = setup({ maxBatchSize: 8, padVariableLengthInputs: true });
    const [a, b] = await Promise.all([
      session.run({ x: rows([[1, 2]]) }),
      session.run({ x: rows([[3, 4, 5]]) }),
    ]);
    assert.equal(inner.runs.length, 1);
    assert.deepEqual(inner.runs[0]!.shape, [2, 3]);
    assert.deepEqual(inner.runs[0]!.data, [1, 2, 1, 3, 4, 5]);
    // As in TF Serving, outputs are split along dimension 0 only and keep the padded inner size.
    assert.deepEqual(a['y']!.shape, [1, 3]);
    assert.deepEqual(values(a['y']).slice(0, 2), [2, 4]);
    assert.deepEqual(values(b['y']), [6, 8, 10]);
  });

  void it('num_batch_threads bounds the batches in flight', async () => {
    const { inner, session } = setup({ maxBatchSize: 1, numBatchThreads: 2 }, 2);
    inner.gate = deferred();
    const all = [1, 2, 3, 4, 5].map((v) => session.run({ x: rows([[v, v]]) }));
    while (inner.runs.length < 2) await sleep(1);
    await sleep(10);
    assert.equal(inner.runs.length, 2);
    inner.gate.resolve();
    await Promise.all(all);
    assert.equal(inner.maxActive, 2);
  });

  void it('rejects unequal batch dimensions and fails queued requests with UNAVAILABLE on close', async () => {
    const two: Signature = {
      ...SIGNATURE,
      inputs: { x: SIGNATURE.inputs['x']!, z: { name: 'z', dtype: 'float32', shape: [-1, -1] } },
    };
    const { session: s2 } = setup({}, 1, two);
    await assert.rejects(
      s2.run({
        x: rows([[1, 1]]),
        z: rows([
          [1, 1],
          [2, 2],
        ]),
      }),
      isCode(Code.INVALID_ARGUMENT, /equal 0th-dimension size/),
    );
    const { inner, session } = setup({ maxBatchSize: 1 });
    inner.gate = deferred();
    const running = session.run({ x: rows([[1, 1]]) });
    while (inner.runs.length === 0) await sleep(1);
    const queued = session.run({ x: rows([[2, 2]]) });
    const closing = session.close();
    await assert.rejects(queued, isCode(Code.UNAVAILABLE));
    inner.gate.resolve();
    await running;
    await closing;
    await assert.rejects(session.run({ x: rows([[1, 1]]) }), isCode(Code.UNAVAILABLE));
  });
});
