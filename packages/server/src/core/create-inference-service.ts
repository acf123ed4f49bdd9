import { Code, ServingError, type Tensor, internal } from '@visionserve/protocol';
import type { Logger } from '../util/logger.js';
import { abortError, raceAbort } from './abort-error.js';
import { type AdmissionPolicy, QUEUE_AS_TF_SERVING, checkAdmission } from './admission.js';
import type { InferenceObserver, PredictEnd } from './inference-observer.js';
import { type PendingRuns, createPendingRuns } from './pending-admissions.js';
import type {
  BodyArrival,
  CallOptions,
  InferenceService,
  Servable,
  ServablePredictRequest,
} from './inference-service.js';
import type { InferenceStatistics } from './inference-statistics.js';
import type { ModelManager, ServableHandle } from './model-manager.js';
import { type RequestStatistics, createRequestStatistics } from './request-statistics.js';
import { type ResponseCache, responseCacheKey } from './response-cache.js';
import { type RunOptions, type Session, sessionSignatures } from './session.js';
import { DEFAULT_SIGNATURE_NAME, type Signature, batchesAlongDimension0 } from './signature.js';
import { validateInputs, validateOutputFilter } from './validate-inputs.js';

/**
 * Turns the inputs clients send to an adapted signature (`Signature.adapter`) into the
 * model's inputs: parses tf.Examples, decodes images. Errors are ServingErrors.
 */
export type InputAdapter<A> = (
  signature: Signature,
  inputs: Readonly<Record<string, Tensor>>,
  assets: A,
  signal: AbortSignal | undefined,
) => Promise<Record<string, Tensor>>;

/**
 * The signatures a version serves, from its session's and its assets: may add signatures
 * (e.g. an encoded-image one) or replace them. `problems` are logged once per version and
 * asset set (e.g. a visionserve.json setting that does not fit the model).
 */
export type SignatureExtender<A> = (
  signatures: Readonly<Record<string, Signature>>,
  assets: A,
) => { readonly signatures: Readonly<Record<string, Signature>>; readonly problems?: readonly string[] };

export interface InferenceServiceOptions<A> {
  /** Owns the model versions; the service acquires/releases one version per call. */
  readonly manager: ModelManager<A>;
  /** Receives internal faults (their details never reach the client). */
  readonly logger: Logger;
  /** Load shedding (see AdmissionPolicy). Default: no queue-wait limit; deadlines and queue bounds still apply. */
  readonly admission?: AdmissionPolicy | undefined;
  /** Derives the signatures clients see. Default: the session's signatures as they are. */
  readonly extendSignatures?: SignatureExtender<A> | undefined;
  /** Runs for signatures with an adapter. Default: such requests fail with UNIMPLEMENTED. */
  readonly adaptInputs?: InputAdapter<A> | undefined;
  /**
   * Answers repeated predicts of opted-in versions from a cache (`enabledFor` their
   * assets). The caller invalidates entries when versions unload or change assets.
   * Default: no cache.
   */
  readonly responseCache?:
    { readonly cache: ResponseCache; readonly enabledFor: (assets: A) => boolean } | undefined;
  /** Told of every predict (metrics, request logs, tracing). Default: none (no cost). */
  readonly observer?: InferenceObserver | undefined;
  /**
   * Receives the statistics of every request that runs a model (whatever its protocol) and
   * of every model run; answers from the response cache run no model and are not counted.
   * Default: none kept.
   */
  readonly statistics?: InferenceStatistics | undefined;
}

/** Signature name of a request: "" and undefined mean the default, as in TF Serving. */
function signatureNameOf(name: string | undefined): string {
  return name === undefined || name === '' ? DEFAULT_SIGNATURE_NAME : name;
}

/** Batch items of a request: dimension 0 of its first input for a model that batches, else 1. */
function itemsOf(signature: Signature, inputs: Readonly<Record<string, Tensor>>): number {
  if (!batchesAlongDimension0(signature)) return 1;
  for (const tensor of Object.values(inputs)) return tensor.shape[0] ?? 1;
  return 1;
}

/** What scopedServable needs from its service. */
interface ServableContext<A> {
  readonly logger: Logger;
  readonly admission: AdmissionPolicy;
  /** Requests with decoded tensors whose runs are not submitted yet (being adapted). */
  readonly pending: PendingRuns;
  readonly signatures: Readonly<Record<string, Signature>>;
  readonly adaptInputs: InputAdapter<A>;
  readonly cache: ResponseCache | undefined;
}

/** The response cache's key of a predict on `signatureName` (the model's own inputs kept apart). */
function cacheKeyOf<A>(
  handle: ServableHandle<A>,
  signatureName: string,
  request: ServablePredictRequest,
  aliases: readonly string[],
): string {
  const signature = `${signatureName}${request.modelInputs === true ? '#model' : ''}`;
  return responseCacheKey(handle.name, handle.version, signature, aliases, request.inputs);
}

/** The run-time admission check; a refused request counts as one that reached the model. */
function admitRun<A>(
  handle: ServableHandle<A>,
  { admission, pending }: ServableContext<A>,
  deadline: number | undefined,
  stats: RequestStatistics | undefined,
): void {
  try {
    checkAdmission(handle.session, admission, handle.name, deadline, pending.count(handle.session));
  } catch (error) {
    stats?.predicting();
    throw error;
  }
}

/** The model's inputs from a client's inputs to an adapted signature; queued work meanwhile. */
async function adaptedInputs<A>(
  handle: ServableHandle<A>,
  context: ServableContext<A>,
  signature: Signature,
  inputs: Readonly<Record<string, Tensor>>,
  signal: AbortSignal | undefined,
): Promise<Record<string, Tensor>> {
  // Admitted model work from here on, while its inputs are adapted (an image decoded).
  const leave = context.pending.enter(handle.session);
  try {
    return await raceAbort(context.adaptInputs(signature, inputs, handle.assets, signal), signal);
  } finally {
    leave();
  }
}

/**
 * The servable a `withServable` callback sees. Runs it starts are recorded so that the
 * version is released only after the last one settles, even when the caller was
 * answered early by an abort; using it after the scope has ended is a bug (INTERNAL).
 */
function scopedServable<A>(
  handle: ServableHandle<A>,
  context: ServableContext<A>,
  scope: CallOptions,
  runs: Promise<unknown>[],
  isOpen: () => boolean,
  observer: InferenceObserver | undefined,
  stats: RequestStatistics | undefined,
): Servable<A> {
  const { session } = handle;
  const { logger, admission, pending, signatures, cache } = context;
  const signature = (name?: string): { name: string; signature: Signature } => {
    const resolved = signatureNameOf(name);
    if (!Object.hasOwn(signatures, resolved)) {
      throw new ServingError(Code.FAILED_PRECONDITION, `Serving signature key "${resolved}" not found.`);
    }
    return { name: resolved, signature: signatures[resolved]! };
  };
  return {
    name: handle.name,
    version: handle.version,
    signatures,
    assets: handle.assets,
    signature,
    admit(options: CallOptions = {}, body?: BodyArrival) {
      const deadline = options.deadline ?? scope.deadline;
      checkAdmission(session, admission, handle.name, deadline, pending.count(session));
      return body === undefined ? () => undefined : pending.arriving(session, body);
    },
    predict(request: ServablePredictRequest, options: CallOptions = {}) {
      if (observer === undefined) return run(request, options, undefined);
      // --- observer hook: told of the start (inputs still intact) and of the outcome.
      const started = performance.now();
      let timings: PredictEnd['timings'];
      const onTimings = (t: NonNullable<PredictEnd['timings']>): void => {
        timings = t;
      };
      let done: ((end: PredictEnd) => void) | undefined;
      try {
        done = observer.predictStarting({
          model: handle.name,
          version: handle.version,
          signatureName: signatureNameOf(request.signatureName),
          inputs: request.inputs,
          outputFilter: request.outputFilter ?? [],
          signal: options.signal ?? scope.signal,
        });
      } catch (error) {
        logger.warn('inference observer failed', { error });
      }
      if (done === undefined) return run(request, options, undefined);
      const report = (code: Code, outputs: Record<string, Tensor> | undefined): void => {
        try {
          done({ code, outputs, timings, durationMs: performance.now() - started });
        } catch (error) {
          logger.warn('inference observer failed', { error });
        }
      };
      return run(request, options, onTimings).then(
        (outputs) => {
          report(Code.OK, outputs);
          return outputs;
        },
        (error: unknown) => {
          report(error instanceof ServingError ? error.code : Code.INTERNAL, undefined);
          throw error;
        },
      );
    },
  };

  async function run(
    request: ServablePredictRequest,
    options: CallOptions,
    onTimings: RunOptions['onTimings'],
  ): Promise<Record<string, Tensor>> {
    if (!isOpen()) throw internal('Servable used after its scope ended');
    const signal = options.signal ?? scope.signal;
    // A request counts (success or fail) once it reaches the model: shed or cancelled ones
    // do, malformed ones do not (Triton counts neither requests it refuses in validation).
    if (signal?.aborted) {
      stats?.predicting();
      throw abortError(signal);
    }
    const { name, signature: sig } = signature(request.signatureName);
    if (options.arrivedAt !== undefined) stats?.arrived(options.arrivedAt);
    admitRun(handle, context, options.deadline ?? scope.deadline, stats);
    const adapted = sig.adapter !== undefined && request.modelInputs !== true;
    const modelSignature: Signature = { ...sig, inputs: sig.modelInputs ?? sig.inputs };
    validateInputs(adapted ? sig : modelSignature, request.inputs);
    const aliases = validateOutputFilter(sig, request.outputFilter);
    const key = cache === undefined ? undefined : cacheKeyOf(handle, name, request, aliases);
    const cached = key === undefined ? undefined : cache!.lookup(key, handle.name);
    if (cached !== undefined) return cached;
    let byAlias = request.inputs;
    if (adapted) {
      byAlias = await adaptedInputs(handle, context, sig, request.inputs, signal);
      validateInputs(modelSignature, byAlias);
    }
    stats?.predicting();
    const inputs: Record<string, Tensor> = {};
    for (const [alias, tensor] of Object.entries(byAlias)) {
      inputs[modelSignature.inputs[alias]!.name] = tensor;
    }
    const outputNames = aliases.map((alias) => sig.outputs[alias]!.name);
    const runs_ = sig.runs ?? name;
    const record = stats?.runStarting(itemsOf(modelSignature, byAlias));
    const running = session.run(inputs, {
      signal,
      outputNames,
      transfer: adapted ? undefined : request.ownedBuffers,
      lease: request.outputLease,
      onTimings:
        record === undefined
          ? onTimings
          : (t) => {
              record.options.onTimings(t);
              onTimings?.(t);
            },
      onExecution: record?.options.onExecution,
      ...(runs_ === DEFAULT_SIGNATURE_NAME && session.signatures === undefined
        ? {}
        : { signatureName: runs_ }),
    });
    runs.push(
      running.then(
        () => record?.ended(),
        () => record?.ended(),
      ),
    );
    const results = await raceAbort(running, signal);
    const outputs: Record<string, Tensor> = {};
    for (const alias of aliases) {
      const tensor = results[sig.outputs[alias]!.name];
      if (tensor === undefined) {
        logger.error('Session did not return a requested output', {
          model: handle.name,
          version: handle.version,
          output: alias,
        });
        throw internal(`Model did not produce output ${alias}`);
      }
      outputs[alias] = tensor;
    }
    if (key !== undefined) cache!.insert(key, handle.name, handle.version, outputs);
    return outputs;
  }
}

/**
 * The InferenceService on top of a ModelManager. Every call acquires one version for
 * its whole duration and releases it after the callback and its runs have settled, so
 * an unloading version is closed only after its last request.
 */
export function createInferenceService<A>(options: InferenceServiceOptions<A>): InferenceService<A> {
  const { manager, logger, statistics } = options;
  const admission: AdmissionPolicy = options.admission ?? QUEUE_AS_TF_SERVING;
  const pending = createPendingRuns(admission.minArrivalBytesPerSecond ?? 0);
  const adaptInputs: InputAdapter<A> =
    options.adaptInputs ??
    (() => Promise.reject(new ServingError(Code.UNIMPLEMENTED, 'This signature needs an input adapter')));
  /** Public signatures per session, for the assets they were derived from. */
  const derived = new WeakMap<Session, { assets: A; signatures: Readonly<Record<string, Signature>> }>();

  function signaturesOf(handle: ServableHandle<A>): Readonly<Record<string, Signature>> {
    const base = sessionSignatures(handle.session);
    const extend = options.extendSignatures;
    if (extend === undefined) return base;
    const memo = derived.get(handle.session);
    if (memo !== undefined && memo.assets === handle.assets) return memo.signatures;
    const { signatures, problems } = extend(base, handle.assets);
    for (const problem of problems ?? []) {
      logger.warn('signature not offered', { model: handle.name, version: handle.version, problem });
    }
    derived.set(handle.session, { assets: handle.assets, signatures });
    return signatures;
  }

  function contextFor(handle: ServableHandle<A>): ServableContext<A> {
    const rc = options.responseCache;
    return {
      logger,
      admission,
      pending,
      signatures: signaturesOf(handle),
      adaptInputs,
      cache: rc !== undefined && rc.enabledFor(handle.assets) ? rc.cache : undefined,
    };
  }

  function toClientError(error: unknown, model: string): ServingError {
    if (error instanceof ServingError) return error;
    logger.error('Internal error during inference', { model, error });
    return internal('Internal error');
  }

  async function withServable<T>(
    spec: Parameters<ModelManager<A>['acquire']>[0],
    fn: (servable: Servable<A>) => Promise<T>,
    callOptions: CallOptions = {},
  ): Promise<T> {
    const { signal } = callOptions;
    if (signal?.aborted) throw abortError(signal);
    const arrivedAt = callOptions.arrivedAt ?? process.hrtime.bigint();
    const handle = manager.acquire(spec);
    const stats =
      statistics === undefined
        ? undefined
        : createRequestStatistics(statistics, handle.name, handle.version, arrivedAt);
    const runs: Promise<unknown>[] = [];
    let open = true;
    try {
      const result = await fn(
        scopedServable(handle, contextFor(handle), callOptions, runs, () => open, options.observer, stats),
      );
      stats?.finish(true);
      return result;
    } catch (error) {
      stats?.finish(false);
      throw toClientError(error, spec.name);
    } finally {
      open = false;
      if (runs.length === 0) handle.release();
      else
        void Promise.all(runs).then(() => {
          handle.release();
        });
    }
  }

  return {
    withServable,

    predict(request, callOptions) {
      return withServable(
        request.model,
        async (servable) => {
          const { name } = servable.signature(request.model.signatureName);
          const outputs = await servable.predict(
            {
              inputs: request.inputs,
              outputFilter: request.outputFilter,
              signatureName: name,
              ownedBuffers: request.ownedBuffers,
              outputLease: request.outputLease,
            },
            callOptions,
          );
          return { model: { name: servable.name, version: servable.version, signatureName: name }, outputs };
        },
        callOptions,
      );
    },

    admit(spec, callOptions = {}, body) {
      // An unknown model or version is answered now (NOT_FOUND), before the body is read.
      const handle: ServableHandle<A> = manager.acquire(spec);
      try {
        const { session } = handle;
        checkAdmission(session, admission, handle.name, callOptions.deadline, pending.count(session));
        return body === undefined ? () => undefined : pending.arriving(session, body);
      } finally {
        handle.release();
      }
    },

    status(model) {
      if (model.version !== undefined && model.label !== undefined) {
        throw new ServingError(
          Code.INVALID_ARGUMENT,
          `Both model version (${model.version}) and model version label (${model.label}) cannot be supplied.`,
        );
      }
      const version =
        model.label !== undefined ? manager.resolveVersionLabel(model.name, model.label) : model.version;
      return manager.status(model.name, version);
    },

    reloadConfig(configs) {
      return manager.setModels(configs);
    },

    modelNames() {
      return manager.modelNames();
    },
  };
}
