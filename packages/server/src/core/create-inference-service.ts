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
import { type RunOptions, type Session, sessionSignatures, unservedNote } from './session.js';
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
  /** Load shedding (see AdmissionPolicy). Default: no queue-wait limit; deadlines still apply. */
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
  /** Requests admitted before their body was read, whose runs are not submitted yet. */
  readonly pending: PendingRuns;
  readonly signatures: Readonly<Record<string, Signature>>;
  readonly adaptInputs: InputAdapter<A>;
  readonly cache: ResponseCache | undefined;
}

/** One `withServable` scope: the pinned version and what its runs report to. */
interface Scope<A> {
  readonly handle: ServableHandle<A>;
  readonly context: ServableContext<A>;
  readonly call: CallOptions;
  /** Runs started in the scope; the version is released after the last one settles. */
  readonly runs: Promise<unknown>[];
  readonly isOpen: () => boolean;
  readonly observer: InferenceObserver | undefined;
  readonly stats: RequestStatistics | undefined;
}

function resolveSignature<A>(s: Scope<A>, name?: string): { name: string; signature: Signature } {
  const { signatures } = s.context;
  const resolved = signatureNameOf(name);
  if (!Object.hasOwn(signatures, resolved)) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `Serving signature key "${resolved}" not found.${unservedNote(s.handle.session.unservedSignatures, resolved)}`,
    );
  }
  return { name: resolved, signature: signatures[resolved]! };
}

/** A predict told to the observer: its start (inputs still intact) and its outcome. */
function observedPredict<A>(
  s: Scope<A>,
  observer: InferenceObserver,
  request: ServablePredictRequest,
  options: CallOptions,
): Promise<Record<string, Tensor>> {
  const { handle } = s;
  const { logger } = s.context;
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
      signal: options.signal ?? s.call.signal,
    });
  } catch (error) {
    logger.warn('inference observer failed', { error });
  }
  if (done === undefined) return runScoped(s, request, options, undefined);
  const report = (code: Code, outputs: Record<string, Tensor> | undefined): void => {
    try {
      done({ code, outputs, timings, durationMs: performance.now() - started });
    } catch (error) {
      logger.warn('inference observer failed', { error });
    }
  };
  return runScoped(s, request, options, onTimings).then(
    (outputs) => {
      report(Code.OK, outputs);
      return outputs;
    },
    (error: unknown) => {
      report(error instanceof ServingError ? error.code : Code.INTERNAL, undefined);
      throw error;
    },
  );
}

/** Admission as the run is about to be submitted; a shed request counts as one that reached the model. */
function admitRun<A>(s: Scope<A>, options: CallOptions): void {
  const { session, name } = s.handle;
  const { admission, pending } = s.context;
  try {
    checkAdmission(session, admission, name, options.deadline ?? s.call.deadline, pending.count(session));
  } catch (error) {
    s.stats?.predicting();
    throw error;
  }
}

/** The requested outputs by alias; a missing one is the session's fault (INTERNAL). */
function requestedOutputs<A>(
  s: Scope<A>,
  sig: Signature,
  aliases: readonly string[],
  results: Readonly<Record<string, Tensor>>,
): Record<string, Tensor> {
  const outputs: Record<string, Tensor> = {};
  for (const alias of aliases) {
    const tensor = results[sig.outputs[alias]!.name];
    if (tensor === undefined) {
      s.context.logger.error('Session did not return a requested output', {
        model: s.handle.name,
        version: s.handle.version,
        output: alias,
      });
      throw internal(`Model did not produce output ${alias}`);
    }
    outputs[alias] = tensor;
  }
  return outputs;
}

/** The model's inputs from a client's inputs to an adapted signature; queued work meanwhile. */
async function adaptedInputs<A>(
  s: Scope<A>,
  signature: Signature,
  inputs: Readonly<Record<string, Tensor>>,
  signal: AbortSignal | undefined,
): Promise<Record<string, Tensor>> {
  const { handle, context } = s;
  // Admitted model work from here on, while its inputs are adapted (an image decoded).
  const leave = context.pending.enter(handle.session);
  try {
    return await raceAbort(context.adaptInputs(signature, inputs, handle.assets, signal), signal);
  } finally {
    leave();
  }
}

/** Starts the session run of model inputs (by alias) and records it among the scope's runs. */
function startRun<A>(
  s: Scope<A>,
  request: ServablePredictRequest,
  run: { name: string; sig: Signature; modelSignature: Signature; adapted: boolean },
  byAlias: Readonly<Record<string, Tensor>>,
  outputNames: string[],
  signal: AbortSignal | undefined,
  onTimings: RunOptions['onTimings'],
): Promise<Record<string, Tensor>> {
  const { session } = s.handle;
  const inputs: Record<string, Tensor> = {};
  for (const [alias, tensor] of Object.entries(byAlias)) {
    inputs[run.modelSignature.inputs[alias]!.name] = tensor;
  }
  const runs = run.sig.runs ?? run.name;
  const record = s.stats?.runStarting(itemsOf(run.modelSignature, byAlias));
  const running = session.run(inputs, {
    signal,
    outputNames,
    transfer: run.adapted ? undefined : request.ownedBuffers,
    lease: request.outputLease,
    onTimings:
      record === undefined
        ? onTimings
        : (t) => {
            record.options.onTimings(t);
            onTimings?.(t);
          },
    onExecution: record?.options.onExecution,
    ...(runs === DEFAULT_SIGNATURE_NAME && session.signatures === undefined ? {} : { signatureName: runs }),
  });
  s.runs.push(
    running.then(
      () => record?.ended(),
      () => record?.ended(),
    ),
  );
  return running;
}

async function runScoped<A>(
  s: Scope<A>,
  request: ServablePredictRequest,
  options: CallOptions,
  onTimings: RunOptions['onTimings'],
): Promise<Record<string, Tensor>> {
  const { handle, context } = s;
  const { cache } = context;
  if (!s.isOpen()) throw internal('Servable used after its scope ended');
  const signal = options.signal ?? s.call.signal;
  // A request counts (success or fail) once it reaches the model: shed or cancelled ones
  // do, malformed ones do not (Triton counts neither requests it refuses in validation).
  if (signal?.aborted) {
    s.stats?.predicting();
    throw abortError(signal);
  }
  const { name, signature: sig } = resolveSignature(s, request.signatureName);
  if (options.arrivedAt !== undefined) s.stats?.arrived(options.arrivedAt);
  admitRun(s, options);
  const adapted = sig.adapter !== undefined && request.modelInputs !== true;
  const modelSignature: Signature = { ...sig, inputs: sig.modelInputs ?? sig.inputs };
  validateInputs(adapted ? sig : modelSignature, request.inputs);
  const aliases = validateOutputFilter(sig, request.outputFilter);
  const key =
    cache === undefined
      ? undefined
      : responseCacheKey(
          handle.name,
          handle.version,
          `${name}${request.modelInputs === true ? '#model' : ''}`,
          aliases,
          request.inputs,
        );
  if (key !== undefined) {
    const cached = cache!.lookup(key, handle.name);
    if (cached !== undefined) return cached;
  }
  let byAlias = request.inputs;
  if (adapted) {
    byAlias = await adaptedInputs(s, sig, request.inputs, signal);
    validateInputs(modelSignature, byAlias);
  }
  s.stats?.predicting();
  const outputNames = aliases.map((alias) => sig.outputs[alias]!.name);
  const running = startRun(
    s,
    request,
    { name, sig, modelSignature, adapted },
    byAlias,
    outputNames,
    signal,
    onTimings,
  );
  const outputs = requestedOutputs(s, sig, aliases, await raceAbort(running, signal));
  if (key !== undefined) cache!.insert(key, handle.name, handle.version, outputs);
  return outputs;
}

/**
 * The servable a `withServable` callback sees. Runs it starts are recorded so that the
 * version is released only after the last one settles, even when the caller was
 * answered early by an abort; using it after the scope has ended is a bug (INTERNAL).
 */
function scopedServable<A>(
  handle: ServableHandle<A>,
  context: ServableContext<A>,
  call: CallOptions,
  runs: Promise<unknown>[],
  isOpen: () => boolean,
  observer: InferenceObserver | undefined,
  stats: RequestStatistics | undefined,
): Servable<A> {
  const s: Scope<A> = { handle, context, call, runs, isOpen, observer, stats };
  return {
    name: handle.name,
    version: handle.version,
    signatures: context.signatures,
    ...(handle.session.unservedSignatures === undefined
      ? {}
      : { unservedSignatures: handle.session.unservedSignatures }),
    assets: handle.assets,
    signature: (name) => resolveSignature(s, name),
    admit(options: CallOptions = {}, body?: BodyArrival) {
      const { admission, pending } = context;
      const deadline = options.deadline ?? call.deadline;
      checkAdmission(handle.session, admission, handle.name, deadline, pending.count(handle.session));
      return body === undefined ? () => undefined : pending.arriving(handle.session, body);
    },
    predict: (request, options = {}) =>
      observer === undefined
        ? runScoped(s, request, options, undefined)
        : observedPredict(s, observer, request, options),
  };
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
