import {
  Code,
  ServingError,
  type Tensor,
  internal,
  invalidArgument,
  unavailable,
} from '@visionserve/protocol';
import { abortError } from '../core/abort-error.js';
import type { RunOptions, Session } from '../core/session.js';
import type { Signature } from '../core/signature.js';
import type { Logger } from '../util/logger.js';
import { QUEUE_FULL_MESSAGE, type Batch, type BatchQueue, type BatchScheduler } from './batch-scheduler.js';
import { type BatchingParameters, roundToAllowedBatchSize } from './batching-parameters.js';
import type { BatchingCounterSink } from './batching-stats.js';
import { concatRows, sliceRows } from './tensor-rows.js';

export interface BatchingSessionOptions {
  /** Resolved parameters of this model version. */
  readonly parameters: BatchingParameters;
  /** The server's shared scheduler; it bounds batches in flight across models. */
  readonly scheduler: BatchScheduler;
  readonly logger: Logger;
  /**
   * Registers this session's counters (e.g. `stats.register` bound to the model
   * and version); called once when the session batches. `queuedTasks` reports
   * the live queue depth. Default: no counters.
   */
  readonly registerCounters?: ((queuedTasks: () => number) => BatchingCounterSink) | undefined;
}

/**
 * Why a signature cannot be batched, or undefined when it can: every input
 * needs a known rank >= 1 with a dynamic (-1) dimension 0, and every output of
 * known shape a dynamic dimension 0 too.
 */
export function unbatchableReason(signature: Signature): string | undefined {
  const inputs = Object.entries(signature.inputs);
  if (inputs.length === 0) return 'the signature has no inputs';
  for (const [alias, spec] of inputs) {
    if (spec.shape === undefined) return `input ${alias} has an unknown rank`;
    if (spec.shape.length === 0 || spec.shape[0] !== -1) {
      return `input ${alias} has no dynamic batch dimension (shape [${spec.shape.join(',')}])`;
    }
  }
  for (const [alias, spec] of Object.entries(signature.outputs)) {
    if (spec.shape !== undefined && (spec.shape.length === 0 || spec.shape[0] !== -1)) {
      return `output ${alias} has no dynamic batch dimension (shape [${spec.shape.join(',')}])`;
    }
  }
  return undefined;
}

interface Request {
  readonly inputs: Readonly<Record<string, Tensor>>;
  readonly size: number;
  readonly signal: AbortSignal | undefined;
  /** performance.now() when the request was queued, for its timings. */
  readonly queuedAt: number;
  readonly onTimings: RunOptions['onTimings'];
  readonly onExecution: RunOptions['onExecution'];
  /** Buffers handed over with the inputs; passed on when the request runs as its own batch. */
  readonly transfer: RunOptions['transfer'];
  readonly pieces: Piece[];
  readonly results: (Record<string, Tensor> | undefined)[];
  done: number;
  settled: boolean;
  readonly resolve: (outputs: Record<string, Tensor>) => void;
  readonly reject: (error: ServingError) => void;
  readonly onAbort: () => void;
}

/** A request, or one part of a split request, as queued. */
interface Piece {
  readonly size: number;
  readonly request: Request;
  readonly index: number;
  /** First row of the request this piece covers. */
  readonly start: number;
}

interface Group {
  readonly queue: BatchQueue<Piece>;
  readonly outputNames: readonly string[] | undefined;
}

const asServingError = (error: unknown): ServingError =>
  error instanceof ServingError ? error : internal('Batched run failed');

/** The state of one batching session, shared by the module-level functions below. */
interface Batcher {
  readonly session: Session;
  readonly params: BatchingParameters;
  readonly scheduler: BatchScheduler;
  readonly logger: Logger;
  /** Largest batch a queue forms (maxExecutionBatchSize with large batch splitting). */
  readonly executionSize: number;
  readonly groups: Map<string, Group>;
  counters: BatchingCounterSink | undefined;
  closed: boolean;
}

function settle(
  request: Request,
  outcome: { outputs: Record<string, Tensor> } | { error: ServingError },
): void {
  if (request.settled) return;
  request.settled = true;
  request.signal?.removeEventListener('abort', request.onAbort);
  if ('outputs' in outcome) request.resolve(outcome.outputs);
  else request.reject(outcome.error);
}

function pieceDone(piece: Piece, outputs: Record<string, Tensor>): void {
  const request = piece.request;
  if (request.settled) return;
  request.results[piece.index] = outputs;
  request.done++;
  if (request.done < request.pieces.length) return;
  if (request.pieces.length === 1) {
    settle(request, { outputs });
    return;
  }
  const merged: Record<string, Tensor> = {};
  for (const name of Object.keys(request.results[0]!)) {
    const parts = request.results.map((r) => r![name]!);
    merged[name] = concatRows(
      parts.map((t) => ({ tensor: t, start: 0, rows: t.shape[0]! })),
      0,
      maxInnerShape(parts),
    );
  }
  settle(request, { outputs: merged });
}

/** The live pieces of a batch, its rows, the padded batch size, and whether it is one whole request. */
interface BatchPlan {
  readonly live: readonly Piece[];
  readonly rows: number;
  readonly padded: number;
  /** The only piece when it is a whole request with no padding: its inputs run as they are. */
  readonly whole: Piece | undefined;
}

function planBatch(b: Batcher, batch: Batch<Piece>): BatchPlan | undefined {
  const live = batch.tasks.filter((p) => !p.request.settled);
  if (live.length === 0) return undefined;
  const rows = live.reduce((n, p) => n + p.size, 0);
  const padded = roundToAllowedBatchSize(b.params.allowedBatchSizes, rows);
  const only = live.length === 1 ? live[0]! : undefined;
  const whole =
    only !== undefined && only.start === 0 && only.size === only.request.size && padded === rows
      ? only
      : undefined;
  return { live, rows, padded, whole };
}

/** The batch's inputs: the pieces' rows concatenated along dimension 0, padded. */
function batchInputs(b: Batcher, plan: BatchPlan): Record<string, Tensor> {
  const { live, rows, padded, whole } = plan;
  if (whole !== undefined) return { ...whole.request.inputs };
  const inputs: Record<string, Tensor> = {};
  for (const name of Object.keys(live[0]!.request.inputs)) {
    const ranges = live.map((p) => ({ tensor: p.request.inputs[name]!, start: p.start, rows: p.size }));
    const inner = b.params.padVariableLengthInputs ? maxInnerShape(ranges.map((r) => r.tensor)) : undefined;
    inputs[name] = concatRows(ranges, padded - rows, inner);
  }
  return inputs;
}

/** Runs the merged batch once; timings and the execution go to the requests in it. */
async function runBatch(
  b: Batcher,
  group: Group,
  plan: BatchPlan,
  inputs: Record<string, Tensor>,
): Promise<Record<string, Tensor>> {
  const { live, padded, whole } = plan;
  const { signal, release } = batchSignal(live);
  const batchStart = performance.now();
  try {
    return await b.session.run(inputs, {
      signal,
      outputNames: group.outputNames,
      ...(whole !== undefined ? { transfer: whole.request.transfer } : {}),
      onTimings: (t) => {
        // Each request waited for its batch, then the batch waited for an instance.
        for (const p of live) {
          if (p.index !== p.request.pieces.length - 1) continue;
          p.request.onTimings?.({
            queueMs: batchStart - p.request.queuedAt + t.queueMs,
            computeMs: t.computeMs,
            batchSize: padded,
          });
        }
      },
      onExecution: (e) => {
        // One run, reported once: to the first request in it that listens.
        const reporter = live.find((p) => p.request.onExecution !== undefined);
        reporter?.request.onExecution?.({ batchSize: padded, computeMs: e.computeMs });
      },
    });
  } finally {
    release();
  }
}

/** The error of a batched output without the batch size in dimension 0, if any. */
function badBatchedOutput(
  b: Batcher,
  outputs: Record<string, Tensor>,
  padded: number,
): ServingError | undefined {
  for (const [name, t] of Object.entries(outputs)) {
    if (t.shape.length === 0 || t.shape[0] !== padded) {
      b.logger.error('batched output does not have the batch size in dimension 0', {
        output: name,
        shape: t.shape,
        batchSize: padded,
      });
      return internal(
        `Batched output tensor ${name} has dimension 0 of ${String(t.shape[0])}, expected the batch size ${padded}`,
      );
    }
  }
  return undefined;
}

async function processBatch(b: Batcher, group: Group, batch: Batch<Piece>): Promise<void> {
  const plan = planBatch(b, batch);
  if (plan === undefined) return;
  const { live, rows, padded, whole } = plan;
  let inputs: Record<string, Tensor>;
  try {
    inputs = batchInputs(b, plan);
  } catch (error) {
    b.logger.error('merging a batch failed', { error });
    for (const p of live) settle(p.request, { error: asServingError(error) });
    return;
  }
  let outputs: Record<string, Tensor>;
  try {
    outputs = await runBatch(b, group, plan, inputs);
  } catch (error) {
    for (const p of live) settle(p.request, { error: asServingError(error) });
    return;
  }
  b.counters?.batch(live.length, rows, padded);
  const error = badBatchedOutput(b, outputs, padded);
  if (error !== undefined) {
    for (const p of live) settle(p.request, { error });
    return;
  }
  if (whole !== undefined) {
    pieceDone(whole, outputs);
    return;
  }
  let offset = 0;
  for (const p of live) {
    const own: Record<string, Tensor> = {};
    for (const [name, t] of Object.entries(outputs)) own[name] = sliceRows(t, offset, p.size);
    offset += p.size;
    pieceDone(p, own);
  }
}

/** An abort signal for the wrapped run that fires only once every request of the batch was aborted. */
function batchSignal(live: readonly Piece[]): { signal: AbortSignal | undefined; release: () => void } {
  const requests = [...new Set(live.map((p) => p.request))];
  if (requests.some((r) => r.signal === undefined)) return { signal: undefined, release: () => undefined };
  const controller = new AbortController();
  let remaining = requests.length;
  const onAbort = (): void => {
    if (--remaining === 0)
      controller.abort(new ServingError(Code.CANCELLED, 'Every request of the batch was cancelled'));
  };
  for (const r of requests) r.signal!.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    release: () => {
      for (const r of requests) r.signal!.removeEventListener('abort', onAbort);
    },
  };
}

function groupFor(
  b: Batcher,
  inputs: Readonly<Record<string, Tensor>>,
  outputNames: readonly string[] | undefined,
): Group {
  const { params, groups } = b;
  const parts = Object.keys(inputs)
    .sort()
    .map((name) => {
      const t = inputs[name]!;
      const inner = params.padVariableLengthInputs ? `rank${t.shape.length}` : t.shape.slice(1).join('x');
      return `${name}:${t.dtype}:${inner}`;
    });
  const outputs = outputNames === undefined ? '*' : [...outputNames].sort().join(',');
  const key = `${parts.join(';')}|${outputs}`;
  let group = groups.get(key);
  if (group !== undefined) return group;
  if (groups.size >= 16) {
    // Forget idle queues of shapes seen earlier so odd shapes do not accumulate.
    for (const [k, g] of groups) {
      if (g.queue.idle()) {
        void g.queue.close().drained;
        groups.delete(k);
      }
    }
  }
  const created: Group = {
    outputNames,
    queue: b.scheduler.addQueue<Piece>(
      {
        maxBatchSize: b.executionSize,
        batchTimeoutMicros: params.batchTimeoutMicros,
        maxEnqueuedBatches: params.maxEnqueuedBatches,
        maxInFlightBatches: params.numBatchThreads,
      },
      (batch) => processBatch(b, created, batch),
    ),
  };
  group = created;
  groups.set(key, group);
  return group;
}

function batchSize(inputs: Readonly<Record<string, Tensor>>): number {
  let size: number | undefined;
  for (const t of Object.values(inputs)) {
    if (t.shape.length === 0) {
      throw invalidArgument('Batching Run() input tensors must have at least one dimension');
    }
    if (size === undefined) size = t.shape[0]!;
    else if (t.shape[0] !== size) {
      throw invalidArgument('Batching Run() input tensors must have equal 0th-dimension size');
    }
  }
  return size ?? 0;
}

function pressure(b: Batcher, extraQueued: number): ReturnType<NonNullable<Session['pressure']>> {
  const inner = b.session.pressure?.() ?? { queued: 0, estimatedWaitMs: 0, runMs: 0 };
  let queued = extraQueued;
  for (const group of b.groups.values()) queued += group.queue.queuedTasks();
  // Queued tasks run in batches of up to maxBatchSize after what the instances already hold.
  const batches = Math.ceil(queued / b.params.maxBatchSize);
  return {
    queued: inner.queued + queued,
    estimatedWaitMs: inner.estimatedWaitMs + batches * inner.runMs,
    runMs: inner.runMs,
    instances: inner.instances,
  };
}

/**
 * Splits a request into the pieces it is queued as: the rest of the open batch first, then
 * execution-size batches (large batch splitting), or one piece. A ServingError when the
 * queue cannot take it.
 */
function splitRequest(b: Batcher, request: Request, queue: BatchQueue<Piece>): ServingError | undefined {
  const { size } = request;
  if (!b.params.enableLargeBatchSplitting || size <= queue.openBatchRoom()) {
    request.pieces.push({ size, request, index: 0, start: 0 });
    return undefined;
  }
  const capacity = queue.capacity();
  if (size > capacity) {
    return unavailable(
      `${QUEUE_FULL_MESSAGE}; task size is ${size} but scheduling capacity is only ${capacity}`,
    );
  }
  let start = 0;
  const room = queue.openBatchRoom();
  if (room > 0) {
    request.pieces.push({ size: room, request, index: 0, start: 0 });
    start = room;
  }
  while (start < size) {
    const n = Math.min(b.executionSize, size - start);
    request.pieces.push({ size: n, request, index: request.pieces.length, start });
    start += n;
  }
  return undefined;
}

/** Queues a request of `size` rows in its group; settles when all its pieces ran. */
function enqueue(
  b: Batcher,
  inputs: Readonly<Record<string, Tensor>>,
  size: number,
  runOptions: RunOptions,
): Promise<Record<string, Tensor>> {
  const { signal } = runOptions;
  const queue = groupFor(b, inputs, runOptions.outputNames).queue;
  return new Promise<Record<string, Tensor>>((resolve, reject) => {
    const request: Request = {
      inputs,
      size,
      signal,
      queuedAt: performance.now(),
      onTimings: runOptions.onTimings,
      onExecution: runOptions.onExecution,
      transfer: runOptions.transfer,
      pieces: [],
      results: [],
      done: 0,
      settled: false,
      resolve,
      reject,
      onAbort: () => {
        let dropped = false;
        for (const p of request.pieces) dropped = queue.remove(p) || dropped;
        if (dropped) b.counters?.droppedCancelled();
        settle(request, { error: abortError(signal!) });
      },
    };
    const refused = splitRequest(b, request, queue);
    if (refused !== undefined) {
      b.counters?.rejectedFull();
      reject(refused);
      return;
    }
    try {
      for (const p of request.pieces) queue.schedule(p);
    } catch (error) {
      // Only a single-piece request can be refused here (split requests were checked against capacity).
      for (const p of request.pieces) queue.remove(p);
      b.counters?.rejectedFull();
      reject(asServingError(error));
      return;
    }
    signal?.addEventListener('abort', request.onAbort, { once: true });
  });
}

function run(
  b: Batcher,
  inputs: Readonly<Record<string, Tensor>>,
  runOptions: RunOptions,
): Promise<Record<string, Tensor>> {
  const { session, params } = b;
  if (b.closed) return Promise.reject(unavailable('Model version is unloading'));
  const { signal } = runOptions;
  if (signal?.aborted) return Promise.reject(abortError(signal));
  let size: number;
  try {
    // Refused here, before the request is merged: one bad request never fails a batch.
    session.checkInputs?.(inputs);
    size = batchSize(inputs);
  } catch (error) {
    return Promise.reject(asServingError(error));
  }
  // Nothing to batch: an empty request (or one without inputs) runs as is; so do runs of
  // signatures other than the default one (batching parameters describe that one).
  if (
    size === 0 ||
    (runOptions.signatureName !== undefined &&
      session.signatures?.[runOptions.signatureName] !== session.signature)
  ) {
    return session.run(inputs, runOptions);
  }
  if (size > params.maxBatchSize) {
    return Promise.reject(
      invalidArgument(
        `Task size ${size} is larger than maximum input batch size ${params.maxBatchSize}` +
          ' (split the request, or raise max_batch_size in the batching parameters)',
      ),
    );
  }
  return enqueue(b, inputs, size, runOptions);
}

async function close(b: Batcher): Promise<void> {
  if (b.closed) return;
  b.closed = true;
  const drains: Promise<void>[] = [];
  for (const group of b.groups.values()) {
    const { dropped, drained } = group.queue.close();
    for (const p of dropped) settle(p.request, { error: unavailable('Model version is unloading') });
    drains.push(drained);
  }
  b.groups.clear();
  await Promise.all(drains);
  b.counters?.remove();
  await b.session.close();
}

/**
 * Decorates a Session with dynamic batching (TF Serving's BatchingSession,
 * written from its documented semantics). Requests are grouped by input names,
 * dtypes, inner shapes (only ranks with `padVariableLengthInputs`) and output
 * names; each group has its own queue in the shared scheduler. A batch
 * concatenates its requests along dimension 0 (padded with copies of a real
 * row up to an allowed batch size), runs once, and every caller gets exactly
 * its own rows back. Returns `session` itself when its signature cannot be
 * batched (see unbatchableReason).
 *
 * Errors: INVALID_ARGUMENT for a request larger than maxBatchSize or with
 * unequal dimension 0 across inputs; UNAVAILABLE "The batch scheduling queue to
 * which this task was submitted is full" when the queue is full; a cancelled
 * or expired request is removed from its queue and never runs.
 */
export function createBatchingSession(session: Session, options: BatchingSessionOptions): Session {
  const reason = unbatchableReason(session.signature);
  if (reason !== undefined) {
    options.logger.info('batching disabled for this model: ' + reason);
    return session;
  }
  const params = options.parameters;
  const b: Batcher = {
    session,
    params,
    scheduler: options.scheduler,
    logger: options.logger,
    executionSize: params.enableLargeBatchSplitting ? params.maxExecutionBatchSize : params.maxBatchSize,
    groups: new Map(),
    counters: undefined,
    closed: false,
  };
  b.counters = options.registerCounters?.(() => {
    let n = 0;
    for (const g of b.groups.values()) n += g.queue.queuedTasks();
    return n;
  });
  return {
    signature: session.signature,
    ...(session.checkInputs === undefined ? {} : { checkInputs: session.checkInputs.bind(session) }),
    ...(session.signatures === undefined ? {} : { signatures: session.signatures }),
    ...(session.unservedSignatures === undefined ? {} : { unservedSignatures: session.unservedSignatures }),
    pressure: (extraQueued = 0) => pressure(b, extraQueued),
    run: (inputs, runOptions = {}) => run(b, inputs, runOptions),
    close: () => close(b),
  };
}

/** Per-dimension maximum of the inner (non-batch) shapes; all tensors must share the rank. */
function maxInnerShape(tensors: readonly Tensor[]): number[] | undefined {
  const first = tensors[0];
  if (first === undefined) return undefined;
  const inner = first.shape.slice(1);
  let differs = false;
  for (const t of tensors) {
    if (t.shape.length !== first.shape.length) {
      throw invalidArgument('Tensors of different rank cannot be batched together');
    }
    for (let i = 1; i < t.shape.length; i++) {
      if (t.shape[i] !== inner[i - 1]) differs = true;
      inner[i - 1] = Math.max(inner[i - 1]!, t.shape[i]!);
    }
  }
  return differs ? inner : undefined;
}
