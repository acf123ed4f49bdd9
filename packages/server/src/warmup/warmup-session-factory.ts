import { Code, ServingError, type Tensor, zeros } from '@visionserve/protocol';
import { tensorFromProto, type PredictRequest } from '@visionserve/protocol/tfs-proto';
import { type ModelSource, type Session, type SessionFactory, sessionSignatures } from '../core/session.js';
import { DEFAULT_SIGNATURE_NAME, type Signature } from '../core/signature.js';
import { validateInputs, validateOutputFilter } from '../core/validate-inputs.js';
import type { Logger } from '../util/logger.js';
import { WARMUP_FILE_PATH, parseWarmupFile } from './warmup-file.js';

/** What one version's warmup did (for logs, tests and metrics). */
export interface WarmupReport {
  readonly modelName: string;
  readonly version: number;
  /** "file": records of the warmup file; "built-in": zero tensors; "none": skipped (unknown shapes). */
  readonly kind: 'file' | 'built-in' | 'none';
  /** Records in the warmup file (0 for built-in). */
  readonly records: number;
  /** Session runs made (successful or not). */
  readonly runs: number;
  /** Built-in warmup runs that failed (logged, not fatal). */
  readonly failedRuns: number;
  readonly elapsedMs: number;
}

/**
 * The signatures clients see on one version, and how inputs to an adapted signature
 * (`Signature.adapter`) become the model's inputs: what core's inference service does
 * with its `extendSignatures` and `adaptInputs` for that version's assets.
 */
export interface ServedSignatures {
  readonly signatures: Readonly<Record<string, Signature>>;
  readonly adaptInputs: (
    signature: Signature,
    inputs: Readonly<Record<string, Tensor>>,
  ) => Promise<Record<string, Tensor>>;
}

export interface WarmupSessionFactoryOptions {
  /** The factory whose sessions are warmed up (the runtime's; batching decorates the result). */
  readonly factory: SessionFactory;
  /**
   * Reads `<version dir>/assets.extra/tf_serving_warmup_requests`; resolves
   * undefined when the file does not exist. Other failures fail the load.
   */
  readonly readWarmupFile: (source: ModelSource) => Promise<Uint8Array | undefined>;
  /** Times each record is replayed (`--num_request_iterations_for_warmup`). Default 1. */
  readonly iterations?: number | undefined;
  /**
   * Warmup requests in flight at once; set it to the instances per version so
   * that every worker gets warmed. Default 1.
   */
  readonly concurrency?: number | undefined;
  /**
   * Rounds of built-in warmup for versions without a warmup file: each round
   * runs `concurrency` requests of zeros shaped like the signature (dynamic
   * dimensions = 1); skipped when an input's rank is unknown. 0 disables it. Default 1: one
   * run per instance takes its first-run cost; a second run measured no faster than later
   * ones (MobileNetV2 int8, YOLOX-Nano on AVX2) and only delayed AVAILABLE.
   */
  readonly builtInRounds?: number | undefined;
  /**
   * The signatures of a freshly loaded version as clients see them (e.g. plus the
   * encoded-image signature its visionserve.json asks for), so that warmup records for
   * them replay through the same input adapters as requests (decoders warmed too). Called
   * only for versions with a warmup file. Default: the session's signatures; records for
   * adapted signatures then fail the load with UNIMPLEMENTED.
   */
  readonly servedSignatures?:
    | ((source: ModelSource, signatures: Readonly<Record<string, Signature>>) => Promise<ServedSignatures>)
    | undefined;
  /** Called once per version after its warmup, before the load resolves. */
  readonly onWarmup?: ((report: WarmupReport) => void) | undefined;
  readonly logger: Logger;
}

/** Runs `tasks` with at most `concurrency` in flight; rejects with the first failure after all settled. */
async function runAll(tasks: readonly (() => Promise<void>)[], concurrency: number): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < tasks.length) {
      const task = tasks[next++]!;
      try {
        await task();
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, tasks.length)) }, lane));
  if (failure !== undefined) throw failure as Error;
}

/**
 * A warmup request -> session run arguments, as core's predict makes them: the signature
 * resolved by name among those clients see ("" = serving_default, unknown: FAILED_PRECONDITION
 * as TF Serving), adapted inputs turned into the model's, then aliases mapped to graph names.
 */
async function runArguments(
  session: Session,
  served: ServedSignatures | undefined,
  request: PredictRequest,
): Promise<{ inputs: Record<string, Tensor>; outputNames: string[]; signatureName: string | undefined }> {
  const named = request.modelSpec?.signatureName || DEFAULT_SIGNATURE_NAME;
  const signatures = served?.signatures ?? sessionSignatures(session);
  if (!Object.hasOwn(signatures, named)) {
    throw new ServingError(Code.FAILED_PRECONDITION, `Serving signature key "${named}" not found.`);
  }
  const signature = signatures[named]!;
  const modelSignature: Signature = { ...signature, inputs: signature.modelInputs ?? signature.inputs };
  let byAlias: Record<string, Tensor> = {};
  for (const [alias, proto] of Object.entries(request.inputs)) byAlias[alias] = tensorFromProto(proto, alias);
  if (signature.adapter !== undefined) {
    if (served === undefined) {
      throw new ServingError(
        Code.UNIMPLEMENTED,
        `Warmup requests for signature "${named}" (${signature.adapter.kind} inputs) are not supported`,
      );
    }
    validateInputs(signature, byAlias);
    byAlias = await served.adaptInputs(signature, byAlias);
  }
  validateInputs(modelSignature, byAlias);
  const aliases = validateOutputFilter(signature, request.outputFilter);
  const inputs: Record<string, Tensor> = {};
  for (const [alias, t] of Object.entries(byAlias)) inputs[modelSignature.inputs[alias]!.name] = t;
  const runs = signature.runs ?? named;
  return {
    inputs,
    outputNames: aliases.map((a) => signature.outputs[a]!.name),
    signatureName: runs === DEFAULT_SIGNATURE_NAME && session.signatures === undefined ? undefined : runs,
  };
}

/**
 * SessionFactory decorator that warms a version up before its load resolves,
 * so the model manager marks it AVAILABLE (and status / health checks report
 * it) only after warmup. With a warmup file, every predict_log request is
 * replayed `iterations` times and any failure fails the load (the session is
 * closed); the error names the record. Without one, a built-in warmup runs
 * zero tensors and only logs failures.
 *
 * The composition root applies it to the runtime's factory, below batching
 * (runtime -> warmup -> batching): warmup requests are not merged into one
 * batch, and with `concurrency` = instances each worker of the pool gets its
 * own warmup runs (the pool hands concurrent runs to idle workers). It reads
 * the file through an injected reader, so it stays free of fs and of the
 * repository layer; it imports only core and protocol.
 */
export function createWarmupSessionFactory(options: WarmupSessionFactoryOptions): SessionFactory {
  const iterations = Math.max(1, options.iterations ?? 1);
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const builtInRounds = Math.max(0, options.builtInRounds ?? 1);

  return {
    async load(source: ModelSource): Promise<Session> {
      const log = options.logger.child({ model: source.modelName, version: source.version });
      const what = `${source.modelName}/${source.version}/${WARMUP_FILE_PATH}`;
      const bytes = await options.readWarmupFile(source);
      let requests: PredictRequest[] | undefined;
      if (bytes !== undefined) {
        try {
          requests = parseWarmupFile(bytes, what);
        } catch (error) {
          const e = error instanceof ServingError ? error : new ServingError(Code.DATA_LOSS, String(error));
          throw new ServingError(e.code, `Failed to read warmup file: ${e.message}`, { cause: error });
        }
      }
      const session = await options.factory.load(source);
      const t0 = performance.now();
      try {
        const served =
          requests === undefined
            ? undefined
            : await options.servedSignatures?.(source, sessionSignatures(session));
        const report = requests
          ? await replay(session, served, requests)
          : builtInRounds > 0
            ? await builtIn(session, log)
            : undefined;
        if (report !== undefined) {
          const full: WarmupReport = {
            modelName: source.modelName,
            version: source.version,
            ...report,
            elapsedMs: performance.now() - t0,
          };
          log.info('warmup done', { ...full });
          options.onWarmup?.(full);
        }
      } catch (error) {
        await session.close().catch(() => undefined);
        throw error;
      }
      return session;
    },
  };

  async function replay(
    session: Session,
    served: ServedSignatures | undefined,
    requests: readonly PredictRequest[],
  ): Promise<Omit<WarmupReport, 'modelName' | 'version' | 'elapsedMs'>> {
    let runs = 0;
    const tasks: (() => Promise<void>)[] = [];
    for (let it = 0; it < iterations; it++) {
      requests.forEach((request, i) => {
        tasks.push(async () => {
          runs++;
          try {
            const { inputs, outputNames, signatureName } = await runArguments(session, served, request);
            await session.run(inputs, { outputNames, signatureName });
          } catch (error) {
            const code = error instanceof ServingError ? error.code : Code.INVALID_ARGUMENT;
            const message = error instanceof Error ? error.message : String(error);
            throw new ServingError(code, `Warmup request ${i} of ${WARMUP_FILE_PATH} failed: ${message}`, {
              cause: error,
            });
          }
        });
      });
    }
    await runAll(tasks, concurrency);
    return { kind: 'file', records: requests.length, runs, failedRuns: 0 };
  }

  async function builtIn(
    session: Session,
    log: Logger,
  ): Promise<Omit<WarmupReport, 'modelName' | 'version' | 'elapsedMs'>> {
    const specs = Object.values(session.signature.modelInputs ?? session.signature.inputs);
    if (specs.some((s) => s.shape === undefined)) {
      return { kind: 'none', records: 0, runs: 0, failedRuns: 0 };
    }
    let runs = 0;
    let failedRuns = 0;
    const tasks = Array.from({ length: builtInRounds * concurrency }, () => async () => {
      const inputs: Record<string, Tensor> = {};
      for (const s of specs)
        inputs[s.name] = zeros(
          s.dtype,
          s.shape!.map((d) => (d < 0 ? 1 : d)),
        );
      runs++;
      try {
        await session.run(inputs);
      } catch (error) {
        failedRuns++;
        if (failedRuns === 1) log.warn('built-in warmup run failed (ignored)', { error });
      }
    });
    await runAll(tasks, concurrency);
    return { kind: 'built-in', records: 0, runs, failedRuns };
  }
}
