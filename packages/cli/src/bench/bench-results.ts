/** The shape of results.json: what each suite measured, plus the run's settings. */
import type { RssPerMessagePoint } from './server-rss-per-message.js';
import type { CaseId } from './bench-cases.js';
import type { PathId, PathInfo } from './bench-paths.js';
import type { SuiteId } from './bench-suites.js';
import type { SweepBatching } from './sweep-configs.js';
import type { LatencySummary } from './stats.js';
import type { StreamReport } from './stream-suite.js';

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
  /**
   * Server GC pauses and incremental marking (every isolate, --trace-gc) per request, ms;
   * memory-reducer collections excluded.
   */
  readonly serverGcMsPerRequest?: number;
  /** Major collections (Mark-Compact) in the server per 1000 requests, memory-reducer ones excluded. */
  readonly majorGcsPer1000?: number;
  /** Memory-reducer collections (an isolate V8 sees as idle shrinking its heap) per request, ms. */
  readonly serverReducerGcMsPerRequest?: number;
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
  /** Server RSS per response in flight over gRPC tensor_content (server-rss-per-message.ts), where measured. */
  readonly serverRssPerMessage?: readonly RssPerMessagePoint[] | { readonly unavailable: string };
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
  readonly serverReducerGcMsPerRequest?: number;
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

/** One closed-loop point of the overload test's capacity search. */
export interface OverloadCapacityPoint {
  readonly concurrency: number;
  /** OK answers per second. */
  readonly throughput: number;
  /** Latency of the OK answers. */
  readonly latency: LatencySummary;
  readonly errors: number;
  readonly firstError?: string;
  /** Server CPU time (all threads) per request of the timed block, ms. */
  readonly serverCpuMsPerRequest?: number;
  /** Load generator CPU time per request, ms. */
  readonly clientCpuMsPerRequest?: number;
}

/** A target of issue 9's overload test, evaluated on one run. */
export interface OverloadTarget {
  readonly id:
    | 'goodput'
    | 'accepted-p99'
    | 'rejected-as-shed'
    | 'rejection-time'
    | 'rss-peak'
    | 'rss-after'
    | 'soak-failed'
    | 'soak-rss-growth'
    | 'soak-p99-drift';
  /** The target in words, e.g. "goodput ≥ 80 % of capacity". */
  readonly target: string;
  /** What was measured, in words. */
  readonly measured: string;
  readonly pass: boolean;
}

/** The overload test on one protocol: capacity, then open loop at a multiple of it. */
export interface OverloadRun {
  readonly case: CaseId;
  readonly protocol: 'grpc' | 'rest';
  /** REST: the generator sent `Expect: 100-continue` and the body only after `100 Continue`. */
  readonly expectContinue?: boolean;
  readonly skipped?: string;
  /** `visionserve serve` flags besides the model config (admission limits among them). */
  readonly serverArgs: readonly string[];
  /** os.loadavg() (1, 5, 15 min) before the server started and after the run. */
  readonly loadAverageBefore: readonly number[];
  readonly loadAverageAfter?: readonly number[];
  /** Request body as sent (gRPC message or JSON), bytes. */
  readonly requestBytes?: number;
  readonly capacity?: {
    readonly points: readonly OverloadCapacityPoint[];
    /** Highest OK throughput of the points, req/s. */
    readonly throughput: number;
    /** The smallest concurrency within 5 % of it: its p50 / p99 are "at capacity". */
    readonly concurrency: number;
    readonly p50: number;
    readonly p99: number;
  };
  readonly open?: {
    readonly ratePerSecond: number;
    readonly arrivals: 'poisson' | 'fixed';
    readonly durationMs: number;
    readonly sent: number;
    /** Requests per outcome (ok, shed, shed-429, deadline, timeout, error). */
    readonly counts: Readonly<Record<string, number>>;
    /** Requests per exact answer (`OK`, `UNAVAILABLE`, `HTTP 503`, `transport: ...`). */
    readonly labels: Readonly<Record<string, number>>;
    /** Requests per refusal or error message (numbers as `#`). */
    readonly messages: Readonly<Record<string, number>>;
    /** OK answers per second of offered load. */
    readonly goodput: number;
    /** goodput ÷ capacity. */
    readonly goodputRatio: number;
    /** Accepted (OK) requests, from the scheduled send time. */
    readonly accepted: LatencySummary;
    /** accepted p99 ÷ p99 at capacity. */
    readonly acceptedP99Ratio: number;
    /** Shed requests: from sending to the refusal. */
    readonly rejection: LatencySummary;
    /** Every request: actual send time minus scheduled time (the generator's lag). */
    readonly sendLag: LatencySummary;
    readonly peakOutstanding: number;
    readonly connections: number;
    readonly clientCpuMsPerRequest: number;
    readonly serverCpuMsPerRequest?: number;
    /**
     * Server CPU per request not answered OK, estimated: the loop's server CPU minus the OK
     * answers at the CPU per request measured at capacity, divided by the others.
     */
    readonly serverCpuMsPerRefusal?: number;
    /** The generator's event-loop delay during the loop, ms. */
    readonly generatorLoopDelayP99Ms: number;
    readonly generatorLoopDelayMaxMs: number;
    /** From the first arrival to the last answer, ms. */
    readonly wallMs: number;
  };
  readonly rss?: {
    /** Right after the server reported ready. */
    readonly startMiB: number;
    /** Median over the settle period after the capacity search, before the open loop: the reference. */
    readonly idleMiB: number;
    /** Highest sample from the open loop's start until `afterMs` after its last answer. */
    readonly peakMiB: number;
    /** The sample `afterMs` after the last answer. */
    readonly afterMiB: number;
    readonly afterMs: number;
    /** [s since the open loop started, MiB], one per second (and the last). */
    readonly timeline: readonly (readonly [number, number])[];
  };
  /** The open loop in equal windows of scheduled time (a soak is judged by first against last). */
  readonly windows?: readonly OverloadWindow[];
  readonly targets?: readonly OverloadTarget[];
}

export interface OverloadWindow {
  /** Seconds since the open loop started. */
  readonly fromS: number;
  readonly toS: number;
  readonly sent: number;
  readonly ok: number;
  /** Not answered OK (refused, timed out, failed). */
  readonly failed: number;
  /** Accepted latency from the scheduled send, ms (NaN without OK answers). */
  readonly p50: number;
  readonly p99: number;
  /** Median server RSS in the window, MiB. */
  readonly rssMiB: number;
}

export interface OverloadReport {
  /** Offered rate = factor × measured capacity. */
  readonly factor: number;
  readonly durationMs: number;
  readonly afterMs: number;
  readonly arrivals: 'poisson' | 'fixed';
  readonly timeoutMs: number;
  readonly capacityDurationMs: number;
  readonly capacityConcurrencies: readonly number[];
  /** Pause between the capacity search and the open loop (idle RSS), ms. */
  readonly settleMs: number;
  /** taskset CPU lists, when pinned. */
  readonly serverCpus?: string;
  readonly clientCpus?: string;
  readonly runs: readonly OverloadRun[];
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
    /** glibc malloc settings of this process and every process it started (malloc-tuning.ts); absent in older results. */
    readonly malloc?: string;
    /** node flags of this process (the load generator and the floors in its worker threads); absent in older results. */
    readonly nodeFlags?: readonly string[];
    /** The settings of the run (results.json only). */
    readonly options: Readonly<Record<string, unknown>> & {
      readonly concurrency: number;
      readonly ratePerSecond: number | undefined;
      readonly rateFraction: number;
      readonly durationMs: number;
      readonly minRequests: number;
      readonly maxRequests: number;
      readonly warmup: number;
      /** Served paths warmed up for at least this long, ms (absent in older results). */
      readonly warmupMs?: number;
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
  readonly overload?: OverloadReport;
  readonly stream?: StreamReport;
}
