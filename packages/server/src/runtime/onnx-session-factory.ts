import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { Code, ServingError, isDType, type DType, type Tensor } from '@visionserve/protocol';
import type { ModelSource, RunOptions, Session, SessionFactory } from '../core/session.js';
import type { Signature, TensorSpec } from '../core/signature.js';
import { PREDICT_METHOD_NAME } from '../core/signature.js';
import type { Logger } from '../util/logger.js';
import type { FromWorker, ToWorker, WireSpec, WireTensor } from './wire-tensor.js';
import { toWire } from './wire-tensor.js';
import type { WorkerInit } from './onnx-worker.js';
import { abortError } from '../core/abort-error.js';

export interface OnnxRuntimeOptions {
  /** Worker threads (each with its own onnxruntime session) per model version. Default 1. */
  readonly instances?: number;
  /** onnxruntime intra-op threads per instance; 0 lets onnxruntime choose. Default 1. */
  readonly intraOpThreads?: number;
  /** onnxruntime inter-op threads per instance; 0 lets onnxruntime choose. Default 1. */
  readonly interOpThreads?: number;
  /** Let onnxruntime's thread pool spin while waiting for work. Default false (Node shares the cores). */
  readonly allowSpinning?: boolean;
  /** Runs waiting for a free instance before new ones are refused with UNAVAILABLE. Default 1000. */
  readonly maxQueuedRuns?: number;
  /** File name of the model inside a version directory. Default "model.onnx". */
  readonly modelFileName?: string;
  readonly logger: Logger;
}

const WORKER_URL = new URL('./onnx-worker.js', import.meta.url);

/**
 * The code of a failed model load: DATA_LOSS when onnxruntime cannot parse the file (as
 * TensorFlow answers an unparsable saved_model.pb), INTERNAL otherwise.
 */
export function loadFailureCode(message: string): Code {
  return /protobuf parsing failed|no graph was found|invalid (onnx )?model/i.test(message)
    ? Code.DATA_LOSS
    : Code.INTERNAL;
}

/**
 * The code of a failed run: INVALID_ARGUMENT when onnxruntime's message blames the
 * request (an input's shape, dimensions, type or name), INTERNAL otherwise (the model
 * or the runtime failed; the request may be fine).
 */
export function runFailureCode(message: string): Code {
  return /invalid (dimensions|rank|input|argument|shape)|unexpected input|input.*(shape|type|dimension)|got invalid|missing input|invalid feed|status message:.*(shape|dimension|dims|broadcast)/is.test(
    message,
  )
    ? Code.INVALID_ARGUMENT
    : Code.INTERNAL;
}

/** Creates the runtime's SessionFactory: every session is a pool of worker threads. */
export function createOnnxSessionFactory(options: OnnxRuntimeOptions): SessionFactory {
  return {
    load: (source) => loadPool(source, options),
  };
}

interface Job {
  readonly id: number;
  readonly inputs: readonly WireTensor[];
  readonly transfer: ArrayBuffer[];
  readonly outputNames: readonly string[] | undefined;
  readonly resolve: (outputs: Record<string, Tensor>) => void;
  readonly reject: (error: ServingError) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
  settled: boolean;
}

interface Instance {
  worker: Worker;
  busy: Job | undefined;
  alive: boolean;
}

const TYPE_TO_DTYPE: Readonly<Record<string, DType>> = { float: 'float32', double: 'float64' };

function specFromWire(spec: WireSpec): TensorSpec {
  const dtype = TYPE_TO_DTYPE[spec.type] ?? spec.type;
  if (!isDType(dtype)) {
    throw new ServingError(Code.UNIMPLEMENTED, `Tensor ${spec.name} has unsupported type ${spec.type}`);
  }
  return {
    name: spec.name,
    dtype,
    shape: spec.shape?.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)),
  };
}

function signatureFrom(inputs: readonly WireSpec[], outputs: readonly WireSpec[]): Signature {
  return {
    inputs: Object.fromEntries(inputs.map((s) => [s.name, specFromWire(s)])),
    outputs: Object.fromEntries(outputs.map((s) => [s.name, specFromWire(s)])),
    methodName: PREDICT_METHOD_NAME,
  };
}

function fromWire(t: WireTensor): Tensor {
  if (t.dtype === 'string') return { dtype: 'string', shape: t.shape, data: t.strings };
  const b = t.buffer;
  switch (t.dtype) {
    case 'float32':
      return { dtype: t.dtype, shape: t.shape, data: new Float32Array(b) };
    case 'float64':
      return { dtype: t.dtype, shape: t.shape, data: new Float64Array(b) };
    case 'float16':
    case 'bfloat16':
    case 'uint16':
      return { dtype: t.dtype, shape: t.shape, data: new Uint16Array(b) };
    case 'int8':
      return { dtype: t.dtype, shape: t.shape, data: new Int8Array(b) };
    case 'int16':
      return { dtype: t.dtype, shape: t.shape, data: new Int16Array(b) };
    case 'int32':
      return { dtype: t.dtype, shape: t.shape, data: new Int32Array(b) };
    case 'int64':
      return { dtype: t.dtype, shape: t.shape, data: new BigInt64Array(b) };
    case 'uint8':
    case 'bool':
      return { dtype: t.dtype, shape: t.shape, data: new Uint8Array(b) };
    case 'uint32':
      return { dtype: t.dtype, shape: t.shape, data: new Uint32Array(b) };
    case 'uint64':
      return { dtype: t.dtype, shape: t.shape, data: new BigUint64Array(b) };
  }
}

function startWorker(
  init: WorkerInit,
): Promise<{ worker: Worker; inputs: readonly WireSpec[]; outputs: readonly WireSpec[] }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_URL, { workerData: init });
    const onMessage = (message: FromWorker): void => {
      cleanup();
      if (message.type === 'ready') resolve({ worker, inputs: message.inputs, outputs: message.outputs });
      else {
        void worker.terminate();
        reject(new Error(message.type === 'load-failed' ? message.message : 'unexpected message'));
      }
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const onExit = (code: number): void => {
      cleanup();
      reject(new Error(`worker exited with code ${code} while loading`));
    };
    const cleanup = (): void => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}

async function loadPool(source: ModelSource, options: OnnxRuntimeOptions): Promise<Session> {
  const count = Math.max(1, options.instances ?? 1);
  const modelPath = join(source.path, options.modelFileName ?? 'model.onnx');
  const init: WorkerInit = {
    modelPath,
    intraOpThreads: options.intraOpThreads ?? 1,
    interOpThreads: options.interOpThreads ?? 1,
    allowSpinning: options.allowSpinning ?? false,
  };
  const log = options.logger.child({ model: source.modelName, version: source.version });
  const started = await Promise.allSettled(Array.from({ length: count }, () => startWorker(init)));
  const failure = started.find((r) => r.status === 'rejected');
  if (failure) {
    await Promise.all(
      started.map((r) => (r.status === 'fulfilled' ? r.value.worker.terminate() : Promise.resolve(0))),
    );
    const raw = failure.reason instanceof Error ? failure.reason.message : String(failure.reason);
    // Keep the model directory out of client-visible messages.
    const message = raw.split(source.path).join(`${source.modelName}/${source.version}`);
    throw new ServingError(
      loadFailureCode(raw),
      `Failed to load model ${source.modelName} version ${source.version}: ${message}`,
    );
  }
  const ready = started.map(
    (r) => (r as PromiseFulfilledResult<Awaited<ReturnType<typeof startWorker>>>).value,
  );
  const first = ready[0]!;
  let signature: Signature;
  try {
    signature = signatureFrom(first.inputs, first.outputs);
  } catch (error) {
    await Promise.all(ready.map((r) => r.worker.terminate()));
    throw error;
  }
  log.info('model version loaded', { instances: count, intraOpThreads: init.intraOpThreads });
  return createPoolSession({
    workers: ready.map((r) => r.worker),
    signature,
    log,
    respawn: async () => (await startWorker(init)).worker,
    maxQueuedRuns: options.maxQueuedRuns ?? DEFAULT_MAX_QUEUED_RUNS,
  });
}

/**
 * Test hook: `session[WORKER_FAULTS].kill(i)` terminates instance i's worker as a
 * crash would. Not part of the Session interface; only tests use it.
 */
export const WORKER_FAULTS = Symbol('visionserve.workerFaults');

/** Default bound of the per-version run queue. */
const DEFAULT_MAX_QUEUED_RUNS = 1000;
/** First and largest delay between attempts to replace a dead worker, in ms. */
const RESPAWN_FIRST_DELAY_MS = 100;
const RESPAWN_MAX_DELAY_MS = 30_000;

interface PoolOptions {
  readonly workers: readonly Worker[];
  readonly signature: Signature;
  readonly log: Logger;
  /** Starts a replacement worker with the same model and options. */
  readonly respawn: () => Promise<Worker>;
  readonly maxQueuedRuns: number;
}

function createPoolSession(pool: PoolOptions): Session {
  const { signature, log } = pool;
  const queue: Job[] = [];
  const instances: Instance[] = [];
  let nextId = 1;
  let closed = false;

  const dispatch = (): void => {
    for (const instance of instances) {
      if (!instance.alive || instance.busy) continue;
      const job = queue.shift();
      if (!job) return;
      instance.busy = job;
      const message: ToWorker = { type: 'run', id: job.id, inputs: job.inputs, outputNames: job.outputNames };
      instance.worker.postMessage(message, job.transfer);
    }
  };

  const settle = (job: Job, outcome: { outputs: Record<string, Tensor> } | { error: ServingError }): void => {
    if (job.settled) return;
    job.settled = true;
    job.signal?.removeEventListener('abort', job.onAbort);
    if ('outputs' in outcome) job.resolve(outcome.outputs);
    else job.reject(outcome.error);
  };

  /**
   * A worker that exits (crash, out of memory) fails only the run it held; the
   * instance is replaced with the same model and options, retrying with backoff,
   * so capacity comes back without a reload.
   */
  const attach = (instance: Instance, worker: Worker): void => {
    instance.worker = worker;
    instance.alive = true;
    worker.on('message', (message: FromWorker) => {
      const job = instance.busy;
      instance.busy = undefined;
      if (job && message.type === 'result' && message.id === job.id) {
        const outputs: Record<string, Tensor> = {};
        for (const t of message.outputs) outputs[t.name] = fromWire(t);
        settle(job, { outputs });
      } else if (job && message.type === 'run-failed' && message.id === job.id) {
        // onnxruntime's message names the offending input/shape; it carries no host paths.
        settle(job, { error: new ServingError(runFailureCode(message.message), message.message) });
      }
      dispatch();
    });
    worker.on('error', (error) => {
      log.error('inference worker failed', { error });
    });
    worker.on('exit', (code) => {
      instance.alive = false;
      const job = instance.busy;
      instance.busy = undefined;
      if (job) settle(job, { error: new ServingError(Code.INTERNAL, 'Inference worker stopped') });
      if (closed) return;
      log.error('inference worker exited; replacing it', { code });
      if (instances.every((i) => !i.alive)) {
        for (const queued of queue.splice(0)) {
          settle(queued, { error: new ServingError(Code.UNAVAILABLE, 'No inference worker available') });
        }
      }
      void replace(instance, RESPAWN_FIRST_DELAY_MS);
    });
  };

  const replace = async (instance: Instance, delayMs: number): Promise<void> => {
    await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
    if (closed) return;
    try {
      const worker = await pool.respawn();
      if (closed) {
        await worker.terminate();
        return;
      }
      attach(instance, worker);
      log.info('inference worker replaced');
      dispatch();
    } catch (error) {
      log.error('replacing an inference worker failed; retrying', { error, delayMs });
      void replace(instance, Math.min(delayMs * 2, RESPAWN_MAX_DELAY_MS));
    }
  };

  for (const worker of pool.workers) {
    const instance: Instance = { worker, busy: undefined, alive: true };
    instances.push(instance);
    attach(instance, worker);
  }

  const session: Session & { [WORKER_FAULTS]: { kill(index: number): Promise<number> } } = {
    [WORKER_FAULTS]: {
      kill: (index: number) => instances[index]!.worker.terminate(),
    },
    signature,
    run(
      inputs: Readonly<Record<string, Tensor>>,
      runOptions: RunOptions = {},
    ): Promise<Record<string, Tensor>> {
      if (closed) return Promise.reject(new ServingError(Code.UNAVAILABLE, 'Model version is unloading'));
      const signal = runOptions.signal;
      if (signal?.aborted) return Promise.reject(abortError(signal));
      if (instances.every((i) => !i.alive)) {
        return Promise.reject(new ServingError(Code.UNAVAILABLE, 'No inference worker available'));
      }
      if (queue.length >= pool.maxQueuedRuns) {
        return Promise.reject(
          new ServingError(Code.UNAVAILABLE, `Inference queue is full (${queue.length} runs waiting)`),
        );
      }
      return new Promise((resolve, reject) => {
        const transfer: ArrayBuffer[] = [];
        const wire = Object.entries(inputs).map(([name, t]) => toWire(name, t, transfer));
        const job: Job = {
          id: nextId++,
          inputs: wire,
          transfer,
          outputNames: runOptions.outputNames,
          resolve,
          reject,
          signal,
          settled: false,
          onAbort: () => {
            const index = queue.indexOf(job);
            if (index >= 0) queue.splice(index, 1);
            // A job already in a worker keeps that worker busy until it answers; its result is dropped.
            settle(job, { error: abortError(signal!) });
          },
        };
        signal?.addEventListener('abort', job.onAbort, { once: true });
        queue.push(job);
        dispatch();
      });
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      for (const job of queue.splice(0)) {
        settle(job, { error: new ServingError(Code.UNAVAILABLE, 'Model version is unloading') });
      }
      await Promise.all(instances.map((i) => i.worker.terminate()));
    },
  };
  return session;
}
