import { Code, ServingError, type Tensor, internal } from '@visionserve/protocol';
import type { Logger } from '../util/logger.js';
import { abortError, raceAbort } from './abort-error.js';
import { type AdmissionPolicy, checkAdmission } from './admission.js';
import type { InferenceObserver, PredictEnd } from './inference-observer.js';
import { type PendingAdmissions, createPendingAdmissions } from './pending-admissions.js';
import type { CallOptions, InferenceService, Servable, ServablePredictRequest } from './inference-service.js';
import type { RunOptions } from './session.js';
import type { ModelManager, ServableHandle } from './model-manager.js';
import { DEFAULT_SIGNATURE_NAME, type Signature } from './signature.js';
import { validateInputs, validateOutputFilter } from './validate-inputs.js';

export interface InferenceServiceOptions<A> {
  /** Owns the model versions; the service acquires/releases one version per call. */
  readonly manager: ModelManager<A>;
  /** Receives internal faults (their details never reach the client). */
  readonly logger: Logger;
  /** Load shedding (see AdmissionPolicy). Default: no queue-wait limit; deadlines still apply. */
  readonly admission?: AdmissionPolicy | undefined;
  /** Told of every predict (metrics, request logs, tracing). Default: none (no cost). */
  readonly observer?: InferenceObserver | undefined;
}

/** Signature name of a request: "" and undefined mean the default, as in TF Serving. */
function signatureNameOf(name: string | undefined): string {
  return name === undefined || name === '' ? DEFAULT_SIGNATURE_NAME : name;
}

/**
 * The servable a `withServable` callback sees. Runs it starts are recorded so that the
 * version is released only after the last one settles, even when the caller was
 * answered early by an abort; using it after the scope has ended is a bug (INTERNAL).
 */
function scopedServable<A>(
  handle: ServableHandle<A>,
  logger: Logger,
  scope: CallOptions,
  admission: AdmissionPolicy,
  pending: PendingAdmissions,
  runs: Promise<unknown>[],
  isOpen: () => boolean,
  observer: InferenceObserver | undefined,
): Servable<A> {
  const { session } = handle;
  const signatures: Readonly<Record<string, Signature>> = { [DEFAULT_SIGNATURE_NAME]: session.signature };
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
    if (signal?.aborted) throw abortError(signal);
    const { signature: sig } = signature(request.signatureName);
    // An admitted request's run is about to be submitted: it now counts as queued.
    if (signal !== undefined) pending.take(session, signal);
    checkAdmission(
      session,
      admission,
      handle.name,
      options.deadline ?? scope.deadline,
      pending.count(session),
    );
    validateInputs(sig, request.inputs);
    const aliases = validateOutputFilter(sig, request.outputFilter);
    const inputs: Record<string, Tensor> = {};
    for (const [alias, tensor] of Object.entries(request.inputs)) inputs[sig.inputs[alias]!.name] = tensor;
    const outputNames = aliases.map((alias) => sig.outputs[alias]!.name);
    const running = session.run(inputs, { signal, outputNames, transfer: request.ownedBuffers, onTimings });
    runs.push(running.catch(() => undefined));
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
    return outputs;
  }
}

/**
 * The InferenceService on top of a ModelManager. Every call acquires one version for
 * its whole duration and releases it after the callback and its runs have settled, so
 * an unloading version is closed only after its last request.
 */
export function createInferenceService<A>(options: InferenceServiceOptions<A>): InferenceService<A> {
  const { manager, logger } = options;
  const admission: AdmissionPolicy = options.admission ?? { maxQueueWaitMs: 0 };
  const pending = createPendingAdmissions();

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
    const handle = manager.acquire(spec);
    const runs: Promise<unknown>[] = [];
    let open = true;
    try {
      return await fn(
        scopedServable(handle, logger, callOptions, admission, pending, runs, () => open, options.observer),
      );
    } catch (error) {
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
            },
            callOptions,
          );
          return { model: { name: servable.name, version: servable.version, signatureName: name }, outputs };
        },
        callOptions,
      );
    },

    admit(spec, callOptions = {}) {
      let handle: ServableHandle<A>;
      try {
        handle = manager.acquire(spec);
      } catch {
        // Unknown model or version: the request itself fails with the right error.
        return () => undefined;
      }
      try {
        const { session } = handle;
        const { signal } = callOptions;
        checkAdmission(session, admission, handle.name, callOptions.deadline, pending.count(session, signal));
        return signal === undefined ? () => undefined : pending.add(session, signal);
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
