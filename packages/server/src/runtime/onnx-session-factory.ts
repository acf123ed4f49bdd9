import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { Code, ServingError, isDType, type DType, type Tensor } from '@visionserve/protocol';
import type { ModelSource, RunOptions, Session, SessionFactory } from '../core/session.js';
import type { Signature, TensorSpec } from '../core/signature.js';
import { DEFAULT_SIGNATURE_NAME, PREDICT_METHOD_NAME } from '../core/signature.js';
import type {
  DeclaredTensor,
  ModelFiles,
  ModelFilesResolver,
  SignatureFile,
} from '../contracts/model-files.js';
import type { Logger } from '../util/logger.js';
import type { FromWorker, ToWorker, WireModel, WireSpec, WireTensor, WorkerInit } from './wire-tensor.js';
import { tensorFromWire, toWire } from './wire-tensor.js';
import { abortError } from '../core/abort-error.js';
import { createWorkerPool } from './worker-pool.js';
import { startWithoutMemoryReducer } from './worker-memory-reducer.js';
import { checkOnnxStringInput } from './onnx-string-check.js';
import { createNativeCallState, guardTerminate, inNativeCall } from './native-call-guard.js';
import type { SpareInferenceWorkers } from './spare-inference-workers.js';

export interface OnnxRuntimeOptions {
  /** Worker threads (each with its own onnxruntime session) per model version. Default 1. */
  readonly instances?: number;
  /** onnxruntime intra-op threads per instance; 0 lets onnxruntime choose. Default 1. */
  readonly intraOpThreads?: number;
  /** onnxruntime inter-op threads per instance; 0 lets onnxruntime choose. Default 1. */
  readonly interOpThreads?: number;
  /** Let onnxruntime's thread pool spin while waiting for work. Default false (Node shares the cores). */
  readonly allowSpinning?: boolean;
  /** Nice value of the inference threads (thread-priority.ts). Default 0 (the event loop's). */
  readonly threadNice?: number;
  /** Runs waiting for a free instance before new ones are refused with UNAVAILABLE. Default 1000. */
  readonly maxQueuedRuns?: number;
  /** File name of the model inside a version directory. Default "model.onnx". */
  readonly modelFileName?: string;
  /**
   * Finds the files of a version (e.g. converting a TensorFlow SavedModel first). Default:
   * `<version>/<modelFileName>` as the one signature serving_default.
   */
  readonly resolveModelFiles?: ModelFilesResolver | undefined;
  /** An inference worker died unasked (it is replaced); for metrics. */
  readonly onWorkerExit?: (() => void) | undefined;
  /**
   * Workers started ahead (spare-inference-workers.ts): a load takes one of these while any
   * is left instead of starting a thread. Default none.
   */
  readonly spareWorkers?: SpareInferenceWorkers | undefined;
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

/** `text` with each absolute path (`/a/b/c.cc:12`, `C:\\a\\b`) cut to its last part (`c.cc:12`). */
export function withoutHostPaths(text: string): string {
  return text.replace(/(?<![\w.])(?:[A-Za-z]:)?(?:[\\/][\w.+@-]+)+[\\/]([\w.+@-]+)/g, '$1');
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

/**
 * Declared tensors (a SavedModel's TensorInfos) over the ONNX file's: each alias must be a
 * graph input/output of the same element type; the declared shape wins.
 */
function declaredSpecs(
  what: string,
  declared: Readonly<Record<string, DeclaredTensor>>,
  actual: Readonly<Record<string, TensorSpec>>,
): Record<string, TensorSpec> {
  const out: Record<string, TensorSpec> = {};
  for (const [alias, d] of Object.entries(declared)) {
    const onnx = actual[alias];
    if (onnx === undefined) {
      throw new ServingError(Code.INTERNAL, `${what} "${alias}" is declared but missing from the ONNX file`);
    }
    if (onnx.dtype !== d.dtype) {
      throw new ServingError(
        Code.INTERNAL,
        `${what} "${alias}" is declared ${d.dtype} but the ONNX file has ${onnx.dtype}`,
      );
    }
    out[alias] = { name: onnx.name, dtype: d.dtype, shape: d.shape };
  }
  return out;
}

/** The signature of one signature file, from the ONNX metadata and what its format declares. */
function signatureOfFile(name: string, file: SignatureFile, model: WireModel): Signature {
  const onnx = signatureFrom(model.inputs, model.outputs);
  const methodName = file.methodName ?? PREDICT_METHOD_NAME;
  const outputs =
    file.outputs === undefined
      ? onnx.outputs
      : declaredSpecs(`Signature ${name} output`, file.outputs, onnx.outputs);
  if (file.examples !== undefined) {
    const { inputKey, features } = file.examples;
    const declared = file.inputs?.[inputKey];
    // One scalar serialized example parses without a batch dimension (as in TensorFlow).
    const batch = declared?.shape?.length === 0 ? [] : [-1];
    const modelInputs: Record<string, TensorSpec> = {};
    for (const f of features) {
      const spec = onnx.inputs[f.key];
      if (spec === undefined) {
        throw new ServingError(
          Code.INTERNAL,
          `Signature ${name}: feature "${f.key}" is not an input of the ONNX file`,
        );
      }
      modelInputs[f.key] = { name: spec.name, dtype: spec.dtype, shape: [...batch, ...f.shape] };
    }
    return {
      inputs: { [inputKey]: { name: inputKey, dtype: 'string', shape: declared?.shape ?? [-1] } },
      outputs,
      methodName,
      adapter: { kind: 'tf-example', inputKey, features },
      modelInputs,
      savedModel: true,
    };
  }
  if (file.inputs === undefined) return { inputs: onnx.inputs, outputs, methodName };
  // Declared tensors come from a SavedModel's SignatureDef.
  const inputs = declaredSpecs(`Signature ${name} input`, file.inputs, onnx.inputs);
  return { inputs, outputs, methodName, savedModel: true };
}

function startWorker(
  shared: WorkerInit,
  spares: SpareInferenceWorkers | undefined,
): Promise<{ worker: Worker; models: readonly WireModel[] }> {
  return new Promise((resolve, reject) => {
    const nativeState = createNativeCallState();
    const init: WorkerInit = { ...shared, nativeState };
    const spare = spares?.take();
    const worker = spare ?? startWithoutMemoryReducer(() => new Worker(WORKER_URL, { workerData: init }));
    // Whoever stops this worker (the pool, a failed load, a test), never inside session.run.
    guardTerminate(worker, nativeState);
    const onMessage = (message: FromWorker): void => {
      cleanup();
      if (message.type === 'ready') resolve({ worker, models: message.models });
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
    if (spare !== undefined) {
      const load: ToWorker = { type: 'load', init };
      spare.postMessage(load);
    }
  });
}

/**
 * A failed load as clients see it: the model directory replaced by name/version, and any other
 * absolute path (onnxruntime's source files, the host's directories) cut to its last part.
 */
function loadError(source: ModelSource, raw: string, code?: Code): ServingError {
  const message = withoutHostPaths(raw.split(source.path).join(`${source.modelName}/${source.version}`));
  return new ServingError(
    code ?? loadFailureCode(raw),
    `Failed to load model ${source.modelName} version ${source.version}: ${message}`,
  );
}

async function loadPool(source: ModelSource, options: OnnxRuntimeOptions): Promise<Session> {
  const count = Math.max(1, options.instances ?? 1);
  const files: ModelFiles =
    options.resolveModelFiles === undefined
      ? {
          signatures: {
            [DEFAULT_SIGNATURE_NAME]: { path: join(source.path, options.modelFileName ?? 'model.onnx') },
          },
        }
      : await options.resolveModelFiles(source);
  // One onnxruntime session per distinct file; signatures that share a file share it.
  const keyOfPath = new Map<string, string>();
  for (const file of Object.values(files.signatures)) {
    if (!keyOfPath.has(file.path)) keyOfPath.set(file.path, `m${keyOfPath.size}`);
  }
  if (keyOfPath.size === 0) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `Failed to load model ${source.modelName} version ${source.version}: it has no servable signature`,
    );
  }
  const init: WorkerInit = {
    models: [...keyOfPath].map(([path, key]) => ({ key, path })),
    intraOpThreads: options.intraOpThreads ?? 1,
    interOpThreads: options.interOpThreads ?? 1,
    allowSpinning: options.allowSpinning ?? false,
    threadNice: options.threadNice ?? 0,
  };
  const log = options.logger.child({ model: source.modelName, version: source.version });
  const started = await Promise.allSettled(
    Array.from({ length: count }, () => startWorker(init, options.spareWorkers)),
  );
  const failure = started.find((r) => r.status === 'rejected');
  if (failure) {
    await Promise.all(
      started.map((r) => (r.status === 'fulfilled' ? r.value.worker.terminate() : Promise.resolve(0))),
    );
    const raw = failure.reason instanceof Error ? failure.reason.message : String(failure.reason);
    if (/Unsupported data type: 16\b/.test(raw)) {
      // onnxruntime-node has no bfloat16 tensors: it refuses the session while reading the metadata.
      throw loadError(
        source,
        'the model has bfloat16 inputs or outputs, which onnxruntime-node does not support (convert them to float16 or float32)',
        Code.UNIMPLEMENTED,
      );
    }
    // Keep the model directory out of client-visible messages.
    throw loadError(source, raw);
  }
  const ready = started.map(
    (r) => (r as PromiseFulfilledResult<Awaited<ReturnType<typeof startWorker>>>).value,
  );
  const first = ready[0]!;
  const signatures: Record<string, Signature> = {};
  const modelOf: Record<string, string> = {};
  try {
    const byKey = new Map(first.models.map((m) => [m.key, m]));
    for (const [name, file] of Object.entries(files.signatures)) {
      const key = keyOfPath.get(file.path)!;
      signatures[name] = signatureOfFile(name, file, byKey.get(key)!);
      modelOf[name] = key;
    }
  } catch (error) {
    await Promise.all(ready.map((r) => r.worker.terminate()));
    if (error instanceof ServingError) throw loadError(source, error.message, error.code);
    throw error;
  }
  const names = Object.keys(signatures);
  const defaultName = Object.hasOwn(signatures, DEFAULT_SIGNATURE_NAME) ? DEFAULT_SIGNATURE_NAME : names[0]!;
  const plain = names.length === 1 && names[0] === DEFAULT_SIGNATURE_NAME;
  log.info('model version loaded', {
    instances: count,
    intraOpThreads: init.intraOpThreads,
    ...(plain ? {} : { signatures: names }),
  });
  for (const [signature, reason] of Object.entries(files.unserved ?? {})) {
    log.warn('signature not served', { signature, reason });
  }
  return createPoolSession({
    workers: ready.map((r) => r.worker),
    signature: signatures[defaultName]!,
    signatures: plain ? undefined : signatures,
    unserved: files.unserved,
    modelOf,
    log,
    respawn: async () => (await startWorker(init, options.spareWorkers)).worker,
    maxQueuedRuns: options.maxQueuedRuns ?? DEFAULT_MAX_QUEUED_RUNS,
    onWorkerExit: options.onWorkerExit,
  });
}

/**
 * Test hook: `session[WORKER_FAULTS].kill(i)` terminates instance i's worker (Worker.terminate,
 * as guarded by native-call-guard.ts) as a crash would; `.inRun(i)` tells whether it is inside a
 * native onnxruntime call now. Not part of the Session interface; only tests use it.
 */
export const WORKER_FAULTS = Symbol('visionserve.workerFaults');

export interface WorkerFaults {
  kill(index: number): Promise<number>;
  inRun(index: number): boolean;
}

/** Default bound of the per-version run queue. */
const DEFAULT_MAX_QUEUED_RUNS = 1000;

interface PoolOptions {
  readonly workers: readonly Worker[];
  readonly signature: Signature;
  /** Every signature when there are several (or other than serving_default). */
  readonly signatures: Readonly<Record<string, Signature>> | undefined;
  /** Signatures of the model's format left out, with the reason. */
  readonly unserved: Readonly<Record<string, string>> | undefined;
  /** Signature name -> the worker's model key that runs it. */
  readonly modelOf: Readonly<Record<string, string>>;
  readonly log: Logger;
  /** Starts a replacement worker with the same model and options. */
  readonly respawn: () => Promise<Worker>;
  readonly maxQueuedRuns: number;
  readonly onWorkerExit: (() => void) | undefined;
}

/** A run as the pool carries it to a worker. */
interface RunJob {
  readonly inputs: readonly WireTensor[];
  readonly transfer: ArrayBuffer[];
  readonly outputNames: readonly string[] | undefined;
  readonly model: string | undefined;
  /** The caller holds an OutputLease: large outputs may be lent from the worker's pool. */
  readonly lend: boolean;
}

interface RunResult {
  readonly outputs: Record<string, Tensor>;
  readonly computeMs: number;
  /** Gives lent outputs back to the worker's pool; undefined when none were lent. */
  readonly release: (() => void) | undefined;
  /** Set once a caller took charge of `release`. */
  claimed: boolean;
}

/** Asks an inference worker to finish its run, release its session and exit; resolves on exit. */
function stopInferenceWorker(worker: Worker): Promise<void> {
  return new Promise((resolve) => {
    worker.once('exit', () => {
      resolve();
    });
    const message: ToWorker = { type: 'close' };
    worker.postMessage(message);
  });
}

/**
 * The Session of one model version: a pool of worker threads, one onnxruntime session
 * each (see worker-pool.ts for queueing, aborts and crash recovery). Inputs move to the
 * worker without copies when they own their buffer or the caller handed the buffer over.
 */
function createPoolSession(pool: PoolOptions): Session {
  const { signature, log } = pool;
  let closed = false;
  const workers = createWorkerPool<RunJob>(
    {
      size: pool.workers.length,
      concurrencyPerWorker: 1,
      maxQueued: pool.maxQueuedRuns,
      keepAlive: true,
      spawn: pool.respawn,
      onUnexpectedExit: pool.onWorkerExit,
      post: (worker, id, job) => {
        const message: ToWorker = {
          type: 'run',
          id,
          inputs: job.inputs,
          outputNames: job.outputNames,
          model: job.model,
          ...(job.lend ? { lend: true } : {}),
        };
        worker.postMessage(message, job.transfer);
      },
      onMessage: (from, raw) => {
        const message = raw as FromWorker;
        if (message.type === 'result') {
          const outputs: Record<string, Tensor> = {};
          const slots: number[] = [];
          for (const t of message.outputs) {
            outputs[t.name] = tensorFromWire(t);
            if (t.dtype !== 'string' && t.slot !== undefined) slots.push(t.slot);
          }
          const release =
            slots.length === 0
              ? undefined
              : () => {
                  const back: ToWorker = { type: 'release', slots };
                  from.worker.postMessage(back);
                };
          const result: RunResult = { outputs, computeMs: message.computeMs, release, claimed: false };
          from.settle(message.id, { value: result });
          // A result nobody awaits any more (the call was aborted) gives its slots back here.
          if (release !== undefined) {
            setImmediate(() => {
              if (!result.claimed) release();
            });
          }
        } else if (message.type === 'run-failed') {
          // onnxruntime's message names the offending input/shape; it carries no host paths.
          from.settle(message.id, {
            error: new ServingError(runFailureCode(message.message), message.message),
          });
        }
      },
      stop: stopInferenceWorker,
      logger: log,
    },
    pool.workers,
  );
  const terminate = (worker: Worker): Promise<number> => worker.terminate();
  /** Moving average of one run as the main thread sees it (dispatch to result), in ms. */
  let runMs = 0;
  const RUN_MS_WEIGHT = 0.1;
  const checkInputs = (inputs: Readonly<Record<string, Tensor>>): void => {
    for (const [name, t] of Object.entries(inputs)) checkOnnxStringInput(name, t);
  };
  const session: Session & { [WORKER_FAULTS]: WorkerFaults } = {
    [WORKER_FAULTS]: {
      kill: (index: number) => terminate(pool.workers[index]!),
      inRun: (index: number) => inNativeCall(pool.workers[index]!),
    },
    signature,
    checkInputs,
    ...(pool.signatures === undefined ? {} : { signatures: pool.signatures }),
    ...(pool.unserved === undefined ? {} : { unservedSignatures: pool.unserved }),
    async run(inputs: Readonly<Record<string, Tensor>>, runOptions: RunOptions = {}) {
      if (closed) throw new ServingError(Code.UNAVAILABLE, 'Model version is unloading');
      const { signal } = runOptions;
      if (signal?.aborted) throw abortError(signal);
      checkInputs(inputs);
      const wanted = runOptions.signatureName;
      const model = wanted === undefined ? undefined : pool.modelOf[wanted];
      if (wanted !== undefined && model === undefined) {
        throw new ServingError(Code.FAILED_PRECONDITION, `Serving signature key "${wanted}" not found.`);
      }
      const transfer: ArrayBuffer[] = [];
      const owned =
        runOptions.transfer === undefined ? undefined : new Set<ArrayBufferLike>(runOptions.transfer);
      const wire = Object.entries(inputs).map(([name, t]) => toWire(name, t, transfer, owned));
      const submitted = performance.now();
      let dispatched = submitted;
      const result = await workers.submit<RunResult>(
        {
          inputs: wire,
          transfer,
          outputNames: runOptions.outputNames,
          model,
          lend: runOptions.lease !== undefined,
        },
        {
          signal,
          onDispatch: () => {
            dispatched = performance.now();
          },
        },
      );
      result.claimed = true;
      if (result.release !== undefined) {
        if (runOptions.lease === undefined) result.release();
        else runOptions.lease.hold(result.release);
      }
      const took = performance.now() - dispatched;
      runMs = runMs === 0 ? took : runMs + RUN_MS_WEIGHT * (took - runMs);
      runOptions.onExecution?.({ computeMs: result.computeMs });
      runOptions.onTimings?.({ queueMs: dispatched - submitted, computeMs: result.computeMs, batchSize: 1 });
      return result.outputs;
    },
    pressure(extraQueued = 0) {
      const instances = Math.max(1, workers.alive);
      const queued = workers.queued + extraQueued;
      // Runs ahead of a new one beyond the free instances: it waits for them (spread over
      // the instances), plus half a run on average; nothing when an instance is free for it.
      const ahead = workers.running + queued - instances;
      const estimatedWaitMs = ahead >= 0 ? (ahead / instances + 0.5) * runMs : 0;
      return { queued, estimatedWaitMs, runMs, instances, maxQueued: pool.maxQueuedRuns };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await workers.close();
    },
  };
  return session;
}
