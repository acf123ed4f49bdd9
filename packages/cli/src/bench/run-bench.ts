/**
 * The benchmark's orchestration: stages the model repository in a temporary folder, states
 * the plan (steps and estimated duration), runs the chosen suites (latency, sweep,
 * cold-start, overload) and assembles results.json's report. The temporary folder and every child
 * process are removed however the run ends (return, error, SIGINT/SIGTERM/SIGHUP).
 * This process is the load generator; servers run in child processes.
 */
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { describeMallocTuning } from '../malloc-tuning.js';
import { join } from 'node:path';
import type { TensorEncoding } from '@visionserve/client';
import { parseFlags, resolveServerConfig } from '@visionserve/server';
import { type BenchCase, type CaseId, loadCase, stageRepository } from './bench-cases.js';
import { PATHS, type PathId } from './bench-paths.js';
import { type BenchPlan, createStepCounter, planBench } from './bench-plan.js';
import type { BenchProgress } from './bench-progress.js';
import type { BenchReport, ColdStartReport, OverloadReport, SweepReport } from './bench-results.js';
import { SUITES, type SuiteId } from './bench-suites.js';
import { runColdStartSuite } from './cold-start-suite.js';
import { DEFAULT_STREAM_SECONDS, type StreamReport, runStreamSuite } from './stream-suite.js';
import { createExitCleanup } from './exit-cleanup.js';
import { type BenchTargets, openLatencyEndpoints } from './latency-endpoints.js';
import { type LatencySuiteResult, runLatencySuite } from './latency-suite.js';
import { DEFAULT_OVERLOAD, type OverloadOptions, runOverloadSuite } from './overload-suite.js';
import type { LoopMode } from './path-runner.js';
import { runSweepSuite } from './sweep-suite.js';
import {
  DEFAULT_SWEEP_CONCURRENCY,
  DEFAULT_SWEEP_CONFIGS,
  type SweepConfig,
  parseSweepConfig,
} from './sweep-configs.js';

export type { BenchTargets } from './latency-endpoints.js';
export type { BenchReport, BenchRow } from './bench-results.js';
export { PATHS, type PathId } from './bench-paths.js';

export interface SweepOptions {
  /** Server layouts. Default DEFAULT_SWEEP_CONFIGS (1x1, 2x1, 1x2, 2x1+b0, 1x2+b0, 2x1+b1ms). */
  readonly configs?: readonly SweepConfig[];
  /** Closed-loop concurrencies. Default 1, 4, 16, 64. */
  readonly concurrencies?: readonly number[];
  /** gRPC request (and server response) encoding. Default tensor_content. */
  readonly encoding?: TensorEncoding;
}

export interface BenchOptions {
  /** Suites to run (always in the order latency, sweep, cold-start, overload). Default latency. */
  readonly suites?: readonly SuiteId[];
  /** Cases of every suite; default: each suite's own (`SUITES[id].defaultCases`). */
  readonly cases?: readonly CaseId[];
  /** Latency suite: paths, in table order. */
  readonly paths: readonly PathId[];
  readonly modes: readonly LoopMode[];
  /** Latency suite: requests in flight in the closed loop. */
  readonly concurrency: number;
  /** Open-loop arrival rate (req/s); when undefined, rateFraction × the path's closed-loop throughput. */
  readonly ratePerSecond: number | undefined;
  readonly rateFraction: number;
  /** Per block (and per sweep point): run for durationMs, at least minRequests, at most maxRequests (latency only). */
  readonly durationMs: number;
  readonly minRequests: number;
  readonly maxRequests: number;
  /** Untimed requests before each path's first block. */
  readonly warmup: number;
  /** Latency suite: served paths keep warming up until this much time has passed, in ms. Default 0. */
  readonly warmupMs?: number;
  /** Latency suite: rounds over all paths; samples of all rounds are pooled. */
  readonly repeat: number;
  /** ../shared (models and photos). */
  readonly sharedDir: string;
  /** Where the staged model repository goes (kept); default: inside the temporary folder (removed). */
  readonly repoDir: string | undefined;
  /** Running servers for the latency suite instead of starting our own (embedded mode when undefined). */
  readonly targets: BenchTargets | undefined;
  /** Extra `visionserve serve` flags for every started server and the in-process probe. */
  readonly serverArgs: readonly string[];
  /** Per-request deadline, ms. */
  readonly timeoutMs: number;
  readonly sweep?: SweepOptions;
  /** Cold-start suite: Predict calls per case after the first. Default 30. */
  readonly coldStartRequests?: number;
  /** The stream suite's long stream (server RSS followed), seconds. Default DEFAULT_STREAM_SECONDS. */
  readonly streamSeconds?: number;
  /** Overload suite settings; each missing one is DEFAULT_OVERLOAD's. */
  readonly overload?: Partial<OverloadOptions>;
  /** Parent of the temporary `visionserve-bench-*` folder. Default os.tmpdir(). */
  readonly tempRoot?: string;
  /** Called once before anything runs, with the number of steps and the estimated duration. */
  readonly onPlan?: (plan: BenchPlan) => void;
  /** A new step starts: `[k/N, elapsed, ~left] what`. */
  readonly onStep?: (text: string) => void;
  /** News within the current step (requests completed). */
  readonly onProgress?: (text: string) => void;
  readonly log?: (line: string) => void;
}

/** The cases each suite runs. */
export function suiteCases(options: Pick<BenchOptions, 'cases'>, suite: SuiteId): readonly CaseId[] {
  return options.cases ?? SUITES[suite].defaultCases;
}

/** The overload suite's settings: the given ones over DEFAULT_OVERLOAD. */
export function overloadOptions(options: Pick<BenchOptions, 'overload'>): OverloadOptions {
  return { ...DEFAULT_OVERLOAD, ...options.overload };
}

/** The plan (steps, estimated seconds) of a run, as stated before it starts. */
export function planFor(options: BenchOptions): BenchPlan {
  const suites = options.suites ?? ['latency'];
  const sweep = options.sweep ?? {};
  const overload = overloadOptions(options);
  return planBench({
    ...(suites.includes('latency')
      ? {
          latency: {
            cases: suiteCases(options, 'latency'),
            paths: options.paths,
            modes: options.modes,
            concurrency: options.concurrency,
            rateFraction: options.rateFraction,
            repeat: options.repeat,
            durationMs: options.durationMs,
            minRequests: options.minRequests,
            maxRequests: options.maxRequests,
            warmup: options.warmup,
            warmupMs: options.warmupMs ?? 0,
            external: options.targets !== undefined,
          },
        }
      : {}),
    ...(suites.includes('sweep')
      ? {
          sweep: {
            cases: suiteCases(options, 'sweep'),
            configs: (sweep.configs ?? DEFAULT_SWEEP_CONFIGS).length,
            concurrencies: sweep.concurrencies ?? DEFAULT_SWEEP_CONCURRENCY,
            durationMs: options.durationMs,
            minRequests: options.minRequests,
            maxRequests: options.maxRequests,
          },
        }
      : {}),
    ...(suites.includes('cold-start')
      ? {
          coldStart: {
            cases: suiteCases(options, 'cold-start'),
            requests: options.coldStartRequests ?? 30,
          },
        }
      : {}),
    ...(suites.includes('stream')
      ? {
          stream: {
            cases: suiteCases(options, 'stream'),
            durationMs: options.durationMs,
            longMs: (options.streamSeconds ?? DEFAULT_STREAM_SECONDS) * 1000,
          },
        }
      : {}),
    ...(suites.includes('overload')
      ? {
          overload: {
            cases: suiteCases(options, 'overload'),
            protocols: overload.protocols.length,
            capacityConcurrencies: overload.capacityConcurrencies,
            capacityDurationMs: overload.capacityDurationMs,
            settleMs: overload.settleMs,
            durationMs: overload.durationMs,
            afterMs: overload.afterMs,
          },
        }
      : {}),
  });
}

type Suite = 'latency' | 'sweep' | 'cold-start' | 'overload' | 'stream';

/** The suites asked for, in the order they run; the suites that start servers refuse --grpc/--rest/... */
function selectedSuites(options: BenchOptions): Suite[] {
  const suites = (['latency', 'sweep', 'cold-start', 'overload', 'stream'] as const).filter((s) =>
    (options.suites ?? ['latency']).includes(s),
  );
  if (options.targets !== undefined && suites.some((s) => s !== 'latency'))
    throw new Error(
      'the sweep, cold-start and overload suites start their own servers: they cannot use --grpc/--rest/...',
    );
  return suites;
}

/** What every suite of one run shares. */
interface SuiteRun {
  readonly options: BenchOptions;
  readonly suites: readonly Suite[];
  readonly temp: string;
  readonly cleanup: ReturnType<typeof createExitCleanup>;
  readonly log: (line: string) => void;
  readonly progress: BenchProgress;
  readonly floorSettings: { intraOpThreads: number; interOpThreads: number; allowSpinning: boolean };
  readonly sweepOptions: SweepOptions;
  readonly encoding: TensorEncoding;
  readonly coldStartRequests: number;
  readonly overloadSettings: OverloadOptions;
}

interface SuiteResults {
  latency?: LatencySuiteResult;
  sweep?: SweepReport;
  coldStart?: ColdStartReport;
  overload?: OverloadReport;
  stream?: StreamReport;
}

async function runLatency(
  run: SuiteRun,
  cases: BenchCase[],
  repo: Awaited<ReturnType<typeof stageRepository>>,
  serverFlags: string[],
): Promise<LatencySuiteResult> {
  const { options, temp, cleanup, log } = run;
  const endpoints = await openLatencyEndpoints({
    paths: options.paths,
    targets: options.targets,
    serverFlags,
    concurrency: options.concurrency,
    timeoutMs: options.timeoutMs,
    workDir: temp,
    cleanup,
    log,
  });
  try {
    return await runLatencySuite({
      cases,
      paths: options.paths,
      modes: options.modes,
      concurrency: options.concurrency,
      ratePerSecond: options.ratePerSecond,
      rateFraction: options.rateFraction,
      durationMs: options.durationMs,
      minRequests: options.minRequests,
      maxRequests: options.maxRequests,
      warmup: options.warmup,
      warmupMs: options.warmupMs ?? 0,
      repeat: options.repeat,
      repo,
      floorSettings: run.floorSettings,
      endpoints,
      progress: run.progress,
    });
  } finally {
    await endpoints.close();
  }
}

/** Stages the models of every suite, then runs the suites one after another. */
async function runSuites(run: SuiteRun): Promise<SuiteResults> {
  const { options, suites, temp, cleanup, progress, encoding } = run;
  const caseIds = [...new Set(suites.flatMap((s) => suiteCases(options, s)))];
  const repo = await stageRepository(options.repoDir ?? join(temp, 'repo'), options.sharedDir, caseIds);
  run.log(`model repository: ${repo.configFile}`);
  const loaded = new Map<CaseId, BenchCase>();
  for (const id of caseIds) loaded.set(id, await loadCase(id, options.sharedDir));
  const casesOf = (s: SuiteId): BenchCase[] => suiteCases(options, s).map((id) => loaded.get(id)!);
  const serverFlags = [`--model_config_file=${repo.configFile}`, ...options.serverArgs];
  const results: SuiteResults = {};
  if (suites.includes('latency'))
    results.latency = await runLatency(run, casesOf('latency'), repo, serverFlags);
  if (suites.includes('sweep')) {
    results.sweep = await runSweepSuite({
      cases: casesOf('sweep'),
      configs: run.sweepOptions.configs ?? DEFAULT_SWEEP_CONFIGS.map(parseSweepConfig),
      concurrencies: run.sweepOptions.concurrencies ?? DEFAULT_SWEEP_CONCURRENCY,
      durationMs: options.durationMs,
      minRequests: options.minRequests,
      maxRequests: options.maxRequests,
      encoding,
      serverFlags,
      repo,
      workDir: temp,
      floorSettings: run.floorSettings,
      timeoutMs: options.timeoutMs,
      cleanup,
      progress,
    });
  }
  if (suites.includes('cold-start')) {
    results.coldStart = await runColdStartSuite({
      cases: casesOf('cold-start'),
      requests: run.coldStartRequests,
      encoding,
      serverFlags,
      timeoutMs: options.timeoutMs,
      cleanup,
      progress,
    });
  }
  if (suites.includes('stream')) {
    results.stream = await runStreamSuite({
      cases: casesOf('stream'),
      durationMs: options.durationMs,
      longMs: (options.streamSeconds ?? DEFAULT_STREAM_SECONDS) * 1000,
      serverFlags,
      cleanup,
      progress,
    });
  }
  if (suites.includes('overload')) {
    results.overload = await runOverloadSuite({
      ...run.overloadSettings,
      cases: casesOf('overload'),
      serverFlags,
      cleanup,
      progress,
    });
  }
  return results;
}

/** The options of the run as the report records them. */
function reportedOptions(run: SuiteRun): BenchReport['meta']['options'] {
  const { options, suites, sweepOptions, encoding } = run;
  return {
    cases: options.cases,
    paths: options.paths,
    modes: options.modes,
    concurrency: options.concurrency,
    ratePerSecond: options.ratePerSecond,
    rateFraction: options.rateFraction,
    durationMs: options.durationMs,
    minRequests: options.minRequests,
    maxRequests: options.maxRequests,
    warmup: options.warmup,
    warmupMs: options.warmupMs ?? 0,
    repeat: options.repeat,
    sharedDir: options.sharedDir,
    repoDir: options.repoDir,
    serverArgs: options.serverArgs,
    timeoutMs: options.timeoutMs,
    ...(suites.includes('sweep')
      ? {
          sweep: {
            configs: (sweepOptions.configs ?? DEFAULT_SWEEP_CONFIGS.map(parseSweepConfig)).map((c) => c.name),
            concurrencies: sweepOptions.concurrencies ?? DEFAULT_SWEEP_CONCURRENCY,
            encoding,
          },
        }
      : {}),
    ...(suites.includes('cold-start') ? { coldStartRequests: run.coldStartRequests } : {}),
    ...(suites.includes('stream') ? { streamSeconds: options.streamSeconds ?? DEFAULT_STREAM_SECONDS } : {}),
    ...(suites.includes('overload') ? { overload: run.overloadSettings } : {}),
    ...(options.targets ? { targets: options.targets } : {}),
  };
}

function benchReport(run: SuiteRun, results: SuiteResults, plan: BenchPlan, started: number): BenchReport {
  const { options, suites } = run;
  const { latency, sweep, coldStart, overload, stream } = results;
  return {
    meta: {
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: availableParallelism(),
      mode: options.targets ? 'external' : 'embedded',
      suites,
      serverArgs: options.serverArgs,
      malloc: describeMallocTuning(process.env),
      nodeFlags: process.execArgv,
      options: reportedOptions(run),
      estimatedS: plan.estimateS,
      durationS: (performance.now() - started) / 1000,
    },
    cases: latency?.cases ?? [],
    paths: PATHS,
    rows: latency?.rows ?? [],
    ...(sweep ? { sweep } : {}),
    ...(coldStart ? { coldStart } : {}),
    ...(stream ? { stream } : {}),
    ...(overload ? { overload } : {}),
  };
}

export async function runBench(options: BenchOptions): Promise<BenchReport> {
  const started = performance.now();
  const suites = selectedSuites(options);
  const log = options.log ?? (() => undefined);
  const plan = planFor(options);
  options.onPlan?.(plan);
  const counter = createStepCounter(plan.steps, plan.estimateS);
  const progress: BenchProgress = {
    step: (text) => options.onStep?.(counter.next(text)),
    tick: (text) => options.onProgress?.(counter.current(text)),
    log,
  };
  const config = resolveServerConfig(parseFlags(options.serverArgs));
  const sweepOptions = options.sweep ?? {};
  const overloadSettings = overloadOptions(options);
  const cleanup = createExitCleanup();
  const tempRoot = options.tempRoot ?? tmpdir();
  await mkdir(tempRoot, { recursive: true });
  const temp = await mkdtemp(join(tempRoot, 'visionserve-bench-'));
  const removeTempOnExit = cleanup.add(() => {
    rmSync(temp, { recursive: true, force: true });
  });
  const run: SuiteRun = {
    options,
    suites,
    temp,
    cleanup,
    log,
    progress,
    floorSettings: {
      intraOpThreads: config.intraOpThreads,
      interOpThreads: config.interOpThreads,
      allowSpinning: config.allowSpinning,
    },
    sweepOptions,
    encoding: sweepOptions.encoding ?? 'tensor_content',
    coldStartRequests: options.coldStartRequests ?? 30,
    overloadSettings,
  };
  let results: SuiteResults;
  try {
    results = await runSuites(run);
  } finally {
    options.onProgress?.('');
    await rm(temp, { recursive: true, force: true });
    removeTempOnExit();
    cleanup.runAll();
    cleanup.dispose();
  }
  return benchReport(run, results, plan, started);
}
