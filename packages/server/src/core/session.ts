import { type Tensor } from '@visionserve/protocol';
import { DEFAULT_SIGNATURE_NAME, type Signature } from './signature.js';

export interface RunOptions {
  /** Aborts queued work; work already running in a worker finishes but its result is dropped. */
  readonly signal?: AbortSignal | undefined;
  /** Output names to compute; all outputs when omitted. */
  readonly outputNames?: readonly string[] | undefined;
  /**
   * Whole buffers handed over with the inputs: input data that are views into one of them
   * travel with the buffer (moved, not copied). Decorators that copy inputs ignore it.
   */
  readonly transfer?: readonly ArrayBuffer[] | undefined;
  /**
   * Which of the session's signatures runs (see `Session.signatures`). Default: the
   * session's `signature`.
   */
  readonly signatureName?: string | undefined;
  /** Told, before the call resolves, how long it waited and ran (once per call that succeeds). */
  readonly onTimings?: ((timings: RunTimings) => void) | undefined;
  /**
   * Told of each model run that served this call as it finishes, for exactly one of the
   * calls a run served: a batching layer that merges calls into one run reports that run to
   * one of them (the first that asked). Summed over calls, every run is reported once.
   */
  readonly onExecution?: ((execution: RunExecution) => void) | undefined;
  /**
   * Lets the runtime hand out outputs that live in its pooled memory (no fresh allocation per
   * run): each such run registers its release with the lease, and the caller releases the
   * lease once nothing reads the outputs any more (e.g. the response has been written). The
   * memory is then reused by later runs. Without a lease outputs are the caller's to keep.
   * Decorators that merge or keep outputs do not pass it on.
   */
  readonly lease?: OutputLease | undefined;
}

/** Borrowed output memory of one call; see RunOptions.lease and createOutputLease. */
export interface OutputLease {
  /** Registers a release; called at once when the lease has already been released. */
  hold(release: () => void): void;
}

/** Where a call's time went, in milliseconds. */
export interface RunTimings {
  /** Waiting for a free instance (and, with batching, for the batch to form). */
  readonly queueMs: number;
  /** The model run itself, as the runtime measured it around session.run. */
  readonly computeMs: number;
  /** Rows in the executed batch (1 without batching); for metrics and traces. */
  readonly batchSize: number;
}

/** One model run, in milliseconds. */
export interface RunExecution {
  /**
   * Rows the run executed when a batching layer merged calls into it (padding included);
   * undefined when the run was the reporting call's alone.
   */
  readonly batchSize?: number | undefined;
  /** The model's own compute time (session.run in the worker). */
  readonly computeMs: number;
}

/**
 * One loaded model version, ready to run. Implemented by the runtime (worker
 * threads + onnxruntime) and decorated by batching; core only sees this interface.
 *
 * Ownership: `run` takes ownership of the input tensors' buffers (they may be
 * transferred to a worker and become detached); the caller owns the outputs.
 */
/** How busy a session is, for admission control. */
export interface SessionPressure {
  /** Runs waiting for an instance. */
  readonly queued: number;
  /** Estimated time a run submitted now waits before it starts, in ms. */
  readonly estimatedWaitMs: number;
  /** Recent time of one run (moving average), in ms; 0 before the first run. */
  readonly runMs: number;
  /** Runs that execute at once (instances). Default 1. */
  readonly instances?: number | undefined;
  /** Runs the queue holds at most (a run submitted beyond it is refused); undefined: no bound known. */
  readonly maxQueued?: number | undefined;
}

export interface Session {
  /** The default signature (serving_default), the one `run` uses without `signatureName`. */
  readonly signature: Signature;
  /**
   * Every signature the session can run, by name (a converted SavedModel has one per
   * SignatureDef); absent: `signature` alone, as serving_default.
   */
  readonly signatures?: Readonly<Record<string, Signature>> | undefined;
  /**
   * Signatures of the model's own format this session does not serve, with the reason
   * (e.g. a SavedModel signature that did not convert): reported in the version's status.
   */
  readonly unservedSignatures?: Readonly<Record<string, string>> | undefined;
  run(inputs: Readonly<Record<string, Tensor>>, options?: RunOptions): Promise<Record<string, Tensor>>;
  /**
   * The session's current load, as if `extraQueued` more runs (default 0) were waiting
   * behind its queue: requests admitted whose runs are not submitted yet. Sessions that
   * cannot tell leave it out (never shed).
   */
  pressure?(extraQueued?: number): SessionPressure;
  /**
   * Throws INVALID_ARGUMENT for inputs this session could not run faithfully (beyond the
   * signature's dtype and shape), so that decorators refuse them before merging them with
   * other requests. `run` checks them too; sessions without such limits leave it out.
   */
  checkInputs?(inputs: Readonly<Record<string, Tensor>>): void;
  /** Releases the session; pending runs are rejected with UNAVAILABLE. */
  close(): Promise<void>;
}

/**
 * What a not-found message for signature `name` adds when the model's format has it but it is
 * not served (a partial load): ` (it is not served: it <reason>)`; else "".
 */
export function unservedNote(unserved: Readonly<Record<string, string>> | undefined, name: string): string {
  const why = unserved !== undefined && Object.hasOwn(unserved, name) ? unserved[name] : undefined;
  return why === undefined ? '' : ` (it is not served: it ${why})`;
}

/** The signatures a session can run, by name. */
export function sessionSignatures(session: Session): Readonly<Record<string, Signature>> {
  return session.signatures ?? { [DEFAULT_SIGNATURE_NAME]: session.signature };
}

/** Where a model version lives and what to call it. */
export interface ModelSource {
  readonly modelName: string;
  readonly version: number;
  /** Directory of the version (holds model.onnx): `<basePath>/<version>`. */
  readonly path: string;
  /** The model's base path (holds the version directories and the model's assets). */
  readonly basePath: string;
  /** The version's files must lie inside `basePath` (see ModelConfig.confined). */
  readonly confined?: boolean | undefined;
}

/** Loads sessions; the composition root passes the runtime's implementation to core. */
export interface SessionFactory {
  load(source: ModelSource): Promise<Session>;
}
