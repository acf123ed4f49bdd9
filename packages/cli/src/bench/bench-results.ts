/** The shape of results.json: what each suite measured, plus the run's settings. */
import type { CaseId } from './bench-cases.js';
import type { PathId, PathInfo } from './bench-paths.js';
import type { SuiteId } from './bench-suites.js';
import type { SweepBatching } from './sweep-configs.js';
import type { LatencySummary } from './stats.js';

/** One row of the latency suite: a path of a case in one loop mode, all rounds pooled. */
export interface BenchRow {
  readonly case: CaseId;
  readonly path: PathId;
  readonly mode: 'closed' | 'open';
  readonly concurrency: number | undefined;
  readonly ratePerSecond: number | undefined;
  /** Set when the row was not measured, with the reason. */
  readonly skipped?: string;
  readonly latency?: LatencySummary;
  /** p50 of each round (a range when repeat > 1). */
  readonly roundP50s?: readonly number[];
  readonly throughput?: number;
  readonly errors?: number;
  readonly firstError?: string;
  readonly requestBytes?: number;
  readonly responseBytes?: number;
  readonly clientCpuMsPerRequest?: number;
  readonly serverCpuMsPerRequest?: number;
  /** Server GC pauses and incremental marking (every isolate, --trace-gc) per request, ms. */
  readonly serverGcMsPerRequest?: number;
  /** Major collections (Mark-Compact) in the server per 1000 requests. */
  readonly majorGcsPer1000?: number;
  /** Percentile ÷ the raw onnxruntime floor's. */
  readonly ratioP50?: number;
  readonly ratioP99?: number;
  /** Percentile ÷ the image floor's (/invocations rows, when the image floor ran). */
  readonly ratioImageFloorP50?: number;
  readonly ratioImageFloorP99?: number;
}

/** A floor's reference percentiles: medians over its blocks (before and after each round). */
export interface FloorReference {
  readonly p50s: readonly number[];
  readonly p50: number;
  readonly p99: number;
}

export interface CaseReport {
  readonly id: CaseId;
  readonly title: string;
  readonly request: string;
  /** The raw onnxruntime floor (NaN when it did not run). */
  readonly floorP50s: readonly number[];
  readonly floorP50: number;
  readonly floorP99: number;
  /** The image floor (cases with an image, when it ran). */
  readonly imageFloor?: FloorReference & { readonly answer: string | undefined };
}

/** One point of the throughput sweep: a server layout, a case, a concurrency. */
export interface SweepRow {
  readonly case: CaseId;
  /** Configuration name, e.g. `2x1+b0`. */
  readonly config: string;
  readonly instances: number;
  readonly intraOpThreads: number;
  readonly batching: SweepBatching | undefined;
  readonly concurrency: number;
  readonly skipped?: string;
  readonly latency?: LatencySummary;
  readonly throughput?: number;
  readonly errors?: number;
  readonly firstError?: string;
  readonly clientCpuMsPerRequest?: number;
  readonly serverCpuMsPerRequest?: number;
  /** As in BenchRow. */
  readonly serverGcMsPerRequest?: number;
  readonly majorGcsPer1000?: number;
}

export interface SweepReport {
  /** Flags every sweep server got besides its layout (e.g. --enable_serialization_as_tensor_content). */
  readonly serverArgs: readonly string[];
  readonly encoding: 'tensor_content' | 'typed';
  readonly concurrencies: readonly number[];
  readonly durationMs: number;
  /** Intra-op threads of the floor's session (the servers' default, from --server-arg). */
  readonly floorIntraOpThreads: number;
  /** The raw onnxruntime floor per case (server's session options), before and after the sweep. */
  readonly floors: readonly {
    readonly case: CaseId;
    readonly title: string;
    readonly before: LatencySummary;
    readonly after: LatencySummary;
  }[];
  readonly rows: readonly SweepRow[];
}

/** First requests after a server start, per case, with and without warmup. */
export interface ColdStartRow {
  readonly case: CaseId;
  /** Whether the server ran its model warmup before reporting ready. */
  readonly warmup: boolean;
  readonly skipped?: string;
  /** From spawning the server to its "ready" line, ms (all models loaded). */
  readonly startMs?: number;
  /** First Predict on an open connection (a GetModelStatus call opened it), ms. */
  readonly firstMs?: number;
  readonly secondMs?: number;
  /** p50 of the later requests (the second half of them), ms. */
  readonly steadyP50Ms?: number;
}

export interface ColdStartReport {
  /** Predict calls per case after the first. */
  readonly requests: number;
  readonly serverArgs: readonly string[];
  readonly rows: readonly ColdStartRow[];
}

export interface BenchReport {
  readonly meta: {
    readonly date: string;
    readonly node: string;
    readonly cpu: string;
    readonly cores: number;
    readonly mode: 'embedded' | 'external';
    readonly suites: readonly SuiteId[];
    readonly serverArgs: readonly string[];
    /** The settings of the run (results.json only). */
    readonly options: Readonly<Record<string, unknown>> & {
      readonly concurrency: number;
      readonly ratePerSecond: number | undefined;
      readonly rateFraction: number;
      readonly durationMs: number;
      readonly minRequests: number;
      readonly maxRequests: number;
      readonly warmup: number;
      readonly repeat: number;
    };
    /** The estimate stated before the run, s. */
    readonly estimatedS: number;
    readonly durationS: number;
  };
  /** Latency suite: its cases (empty when it did not run). */
  readonly cases: readonly CaseReport[];
  readonly paths: readonly PathInfo[];
  /** Latency suite rows. */
  readonly rows: readonly BenchRow[];
  readonly sweep?: SweepReport;
  readonly coldStart?: ColdStartReport;
}
