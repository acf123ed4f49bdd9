/**
 * Test doubles for core: a fake SessionFactory with controllable load/run
 * timing and failures, an in-memory "disk" for listVersions, and a logger that
 * records what it is told. Not a test file itself.
 */
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import type {
  CallOptions,
  InferenceService,
  ModelSpec,
  PredictRequest,
  PredictResponse,
  Servable,
} from '../src/core/inference-service.js';
import type { ModelConfig } from '../src/core/model-config.js';
import type { VersionStatus } from '../src/core/model-state.js';
import type { ModelSource, RunOptions, Session, SessionFactory } from '../src/core/session.js';
import type { Signature } from '../src/core/signature.js';
import type { Logger } from '../src/util/logger.js';

export interface Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Lets pending promise callbacks and timers of 0 ms run. */
export const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Input "x" float32 [-1, 2]; outputs "y" (a copy of x) and "version" int32 [1]. */
export const FAKE_SIGNATURE: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1, 2] } },
  outputs: {
    y: { name: 'y', dtype: 'float32', shape: [-1, 2] },
    version: { name: 'version', dtype: 'int32', shape: [1] },
  },
  methodName: 'tensorflow/serving/predict',
};

export const key = (name: string, version: number): string => `${name}:${version}`;

export interface FakeSessionFactory extends SessionFactory {
  /** Ordered log: "load-start m:1", "load-done m:1", "load-failed m:1", "close m:1". */
  readonly events: string[];
  /** Key -> error thrown by the next loads of that version. */
  readonly failures: Map<string, Error>;
  /** Key -> gate the load of that version waits on. */
  readonly loadGates: Map<string, Promise<void>>;
  /** Delay of every run, in ms. Default 0. */
  runDelayMs: number;
  /** When set, every run rejects with it (after the delay). */
  runFailure: Error | undefined;
  /** Runs in progress right now, per key. */
  readonly activeRuns: Map<string, number>;
  /** Keys closed while a run was still active (must stay empty). */
  readonly closedWhileRunning: string[];
  /** Options each run received. */
  readonly runOptions: (RunOptions | undefined)[];
}

export function createFakeSessionFactory(): FakeSessionFactory {
  const factory: FakeSessionFactory = {
    events: [],
    failures: new Map(),
    loadGates: new Map(),
    runDelayMs: 0,
    runFailure: undefined,
    activeRuns: new Map(),
    closedWhileRunning: [],
    runOptions: [],
    async load(source: ModelSource): Promise<Session> {
      const k = key(source.modelName, source.version);
      factory.events.push(`load-start ${k}`);
      await factory.loadGates.get(k);
      const failure = factory.failures.get(k);
      if (failure !== undefined) {
        factory.events.push(`load-failed ${k}`);
        throw failure;
      }
      factory.events.push(`load-done ${k}`);
      let closed = false;
      return {
        signature: FAKE_SIGNATURE,
        async run(inputs: Readonly<Record<string, Tensor>>, options?: RunOptions) {
          factory.runOptions.push(options);
          if (closed) throw new ServingError(Code.UNAVAILABLE, 'session closed');
          factory.activeRuns.set(k, (factory.activeRuns.get(k) ?? 0) + 1);
          try {
            if (factory.runDelayMs > 0) await sleep(factory.runDelayMs);
            if (options?.signal?.aborted) throw options.signal.reason;
            if (factory.runFailure !== undefined) throw factory.runFailure;
            options?.onExecution?.({ computeMs: factory.runDelayMs });
            options?.onTimings?.({ queueMs: 0, computeMs: factory.runDelayMs, batchSize: 1 });
            const x = inputs.x;
            const outputs: Record<string, Tensor> = {
              version: { dtype: 'int32', shape: [1], data: Int32Array.of(source.version) },
            };
            if (x !== undefined) outputs.y = { dtype: 'float32', shape: x.shape, data: x.data };
            const wanted = options?.outputNames;
            if (wanted === undefined) return outputs;
            return Object.fromEntries(Object.entries(outputs).filter(([name]) => wanted.includes(name)));
          } finally {
            factory.activeRuns.set(k, (factory.activeRuns.get(k) ?? 1) - 1);
          }
        },
        close() {
          if ((factory.activeRuns.get(k) ?? 0) > 0) factory.closedWhileRunning.push(k);
          closed = true;
          factory.events.push(`close ${k}`);
          return Promise.resolve();
        },
      };
    },
  };
  return factory;
}

export interface FakeDisk {
  /** basePath -> versions present. A missing entry means the base path does not exist. */
  readonly dirs: Map<string, number[]>;
  listVersions(basePath: string): Promise<number[]>;
  /** Delay of every listing, in ms. Default 0. */
  listDelayMs: number;
  /** Most listings in progress at the same time so far. */
  maxConcurrentListings: number;
  listings: number;
}

export function createFakeDisk(initial: Record<string, number[]> = {}): FakeDisk {
  let active = 0;
  const disk: FakeDisk = {
    dirs: new Map(Object.entries(initial)),
    listDelayMs: 0,
    maxConcurrentListings: 0,
    listings: 0,
    async listVersions(basePath) {
      active++;
      disk.listings++;
      disk.maxConcurrentListings = Math.max(disk.maxConcurrentListings, active);
      try {
        if (disk.listDelayMs > 0) await sleep(disk.listDelayMs);
        const versions = disk.dirs.get(basePath);
        if (versions === undefined) {
          throw new ServingError(Code.NOT_FOUND, `Could not find base path ${basePath}`);
        }
        return [...versions];
      } finally {
        active--;
      }
    },
  };
  return disk;
}

export interface MemoryLogger extends Logger {
  readonly records: { level: string; message: string; fields: Record<string, unknown> }[];
}

export function createMemoryLogger(): MemoryLogger {
  const records: MemoryLogger['records'] = [];
  const make = (base: Record<string, unknown>): Logger => {
    const at =
      (level: string) =>
      (message: string, fields?: Record<string, unknown>): void => {
        records.push({ level, message, fields: { ...base, ...fields } });
      };
    return {
      debug: at('debug'),
      info: at('info'),
      warn: at('warn'),
      error: at('error'),
      child: (fields) => make({ ...base, ...fields }),
    };
  };
  return Object.assign(make({}), { records });
}

export function floatInput(rows: number[][]): Tensor {
  return { dtype: 'float32', shape: [rows.length, 2], data: Float32Array.from(rows.flat()) };
}

/** Assets of a version without visionserve.json, labels or handler. */
export const NO_ASSETS: ServableAssets = {
  vision: { config: undefined, labels: undefined },
  handlerModulePath: undefined,
};

/** What a fake InferenceService needs to know of its models. */
export interface FakeModels<A = undefined> {
  /** The version and signature a spec resolves to; throw NOT_FOUND etc. like the manager. */
  resolve(spec: ModelSpec): { version: number; signature: Signature; assets?: A };
  /** A predict on the resolved version (`model.version` is set). */
  run(request: PredictRequest, options?: CallOptions): Promise<PredictResponse>;
  status?(spec: ModelSpec): VersionStatus[];
  reloadConfig?(configs: readonly ModelConfig[]): Promise<void>;
  modelNames?(): string[];
}

/** Counts of the scoped core calls a frontend made (one per request is the contract). */
export interface CoreCallCounts {
  withServable: number;
  predict: number;
  status: number;
  /** `InferenceService.admit`: admission that acquires the version itself (gRPC, before pinning). */
  admit: number;
  /** `Servable.admit`: admission on a version already pinned (not a core call of its own). */
  servableAdmit: number;
}

/**
 * An InferenceService over fake models, with the real service's scoping: every request
 * resolves its version once in `withServable`; `predict` is `withServable` + run. Counts
 * the calls it receives.
 */
export function fakeInferenceService<A = undefined>(
  models: FakeModels<A>,
): InferenceService<A> & { readonly calls: CoreCallCounts } {
  const calls: CoreCallCounts = { withServable: 0, predict: 0, status: 0, admit: 0, servableAdmit: 0 };
  const servableFor = (spec: ModelSpec): Servable<A> => {
    const { version, signature, assets } = models.resolve(spec);
    const signatures = { serving_default: signature };
    const signatureOf = (name?: string): { name: string; signature: Signature } => {
      const resolved = name === undefined || name === '' ? 'serving_default' : name;
      if (resolved !== 'serving_default') {
        throw new ServingError(Code.FAILED_PRECONDITION, `Serving signature key "${resolved}" not found.`);
      }
      return { name: resolved, signature };
    };
    return {
      name: spec.name,
      version,
      signatures,
      assets: assets as A,
      signature: signatureOf,
      admit() {
        calls.servableAdmit++;
        return () => undefined;
      },
      async predict(request, options) {
        const { name } = signatureOf(request.signatureName);
        const response = await models.run(
          {
            model: { name: spec.name, version, signatureName: name },
            inputs: request.inputs,
            outputFilter: request.outputFilter,
            ownedBuffers: request.ownedBuffers,
          },
          options,
        );
        return response.outputs;
      },
    };
  };
  const withServable = async <T>(spec: ModelSpec, fn: (s: Servable<A>) => Promise<T>): Promise<T> => {
    calls.withServable++;
    return fn(servableFor(spec));
  };
  return {
    calls,
    withServable,
    predict(request, options) {
      calls.predict++;
      models.resolve(request.model);
      return models.run(request, options);
    },
    admit(spec) {
      calls.admit++;
      models.resolve(spec);
      return () => undefined;
    },
    status(spec) {
      calls.status++;
      if (models.status === undefined) throw new ServingError(Code.UNIMPLEMENTED, 'no status in this fake');
      return models.status(spec);
    },
    reloadConfig: (configs) => models.reloadConfig?.(configs) ?? Promise.resolve(),
    modelNames: () => models.modelNames?.() ?? [],
  };
}
