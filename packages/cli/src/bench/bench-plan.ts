/**
 * How many blocks a run has and about how long it takes, stated before it starts, and the
 * step labels (`[k/N, elapsed, ~left]`) that progress lines carry.
 */
import { CASES, type CaseId } from './bench-cases.js';
import { type PathId, isFloorPath } from './bench-paths.js';
import { CAPACITY_WARMUP_MS, overloadRunSteps } from './overload-suite.js';
import type { LoopMode } from './path-runner.js';

/** Seconds from spawning a server to "ready" (model loads and warmup) on a busy 2-core box. */
const SERVER_START_S = 3;
/** Per-request latency assumed where a case states none, ms. */
const DEFAULT_COST_MS = 20;

export interface BlockLimitsInput {
  readonly durationMs: number;
  readonly minRequests: number;
  readonly maxRequests: number;
  /** Untimed requests before a path's first block. */
  readonly warmup: number;
}

export interface LatencyPlanInput extends BlockLimitsInput {
  readonly cases: readonly CaseId[];
  readonly paths: readonly PathId[];
  readonly modes: readonly LoopMode[];
  readonly concurrency: number;
  readonly rateFraction: number;
  readonly repeat: number;
  /** Servers are running elsewhere (no start-up cost). */
  readonly external: boolean;
  /** Served paths warm up for at least this long, ms. Default 0. */
  readonly warmupMs?: number;
}

export interface SweepPlanInput extends Omit<BlockLimitsInput, 'warmup'> {
  readonly cases: readonly CaseId[];
  readonly configs: number;
  readonly concurrencies: readonly number[];
}

export interface ColdStartPlanInput {
  readonly cases: readonly CaseId[];
  /** Predict calls per case after the first. */
  readonly requests: number;
}

export interface OverloadPlanInput {
  readonly cases: readonly CaseId[];
  readonly protocols: number;
  readonly capacityConcurrencies: readonly number[];
  readonly capacityDurationMs: number;
  readonly settleMs: number;
  readonly durationMs: number;
  readonly afterMs: number;
}

export interface StreamPlanInput {
  readonly cases: readonly CaseId[];
  readonly durationMs: number;
}

export interface SuitePlan {
  /** Progress steps (blocks, server starts). */
  readonly steps: number;
  readonly estimateS: number;
}

export interface BenchPlan {
  readonly latency?: SuitePlan;
  readonly sweep?: SuitePlan;
  readonly coldStart?: SuitePlan;
  readonly overload?: SuitePlan;
  readonly stream?: SuitePlan;
  readonly steps: number;
  readonly estimateS: number;
}

function costMs(id: CaseId, path: PathId): number {
  return CASES[id].costMs[path] ?? DEFAULT_COST_MS;
}

/** Seconds for one closed-loop block: durationMs, stretched to minRequests and cut at maxRequests. */
export function closedBlockS(cost: number, concurrency: number, l: BlockLimitsInput): number {
  const perRequest = cost / Math.max(1, concurrency);
  const ms = Math.min(Math.max(l.durationMs, l.minRequests * perRequest), l.maxRequests * perRequest);
  return (ms + cost) / 1000;
}

/** Paths that send the case's encoded image. */
const IMAGE_PATHS: readonly PathId[] = ['image-floor', 'invocations', 'rest-b64', 'rest-b64-cached'];

/** Whether a path runs for a case (the image paths need an image). */
function runs(id: CaseId, path: PathId): boolean {
  return CASES[id].hasImage || !IMAGE_PATHS.includes(path);
}

export function planLatency(i: LatencyPlanInput): SuitePlan {
  let steps = 0;
  let ms = 0;
  const tls = i.paths.includes('grpc-tls') || i.paths.includes('kserve-https');
  const servers = i.external ? 0 : (i.paths.includes('in-process') ? 1 : 0) + (tls ? 1 : 0) + 2;
  for (const id of i.cases) {
    // The server RSS probe (latency-suite.ts): 1 + 2 requests in flight, 6 per slot.
    if (id === 'raw_detector' && i.paths.includes('grpc-tensor-content')) {
      steps += 1;
      ms += 18 * costMs(id, 'grpc-tensor-content') + 500;
    }
    for (const path of i.paths) {
      const floor = isFloorPath(path);
      const blocks = i.repeat * (floor ? 2 : i.modes.length);
      steps += blocks;
      if (!runs(id, path)) continue;
      const cost = costMs(id, path);
      ms += floor || i.warmup === 0 ? i.warmup * cost : Math.max(i.warmup * cost, i.warmupMs ?? 0);
      if (floor) {
        ms += blocks * closedBlockS(cost, 1, i) * 1000;
        continue;
      }
      for (const mode of i.modes) {
        // Open loop at rateFraction of the closed-loop throughput: min requests take longer.
        const c = mode === 'closed' ? i.concurrency : i.concurrency * i.rateFraction;
        ms += i.repeat * closedBlockS(cost, c, i) * 1000;
      }
    }
  }
  return { steps, estimateS: ms / 1000 + servers * SERVER_START_S };
}

/** Untimed closed loop before each sweep point, ms: min(SWEEP_WARMUP_MS, durationMs). */
export const SWEEP_WARMUP_MS = 500;

export function planSweep(i: SweepPlanInput): SuitePlan {
  let ms = 0;
  for (const id of i.cases) {
    const cost = costMs(id, 'grpc-tensor-content');
    ms += 2 * closedBlockS(costMs(id, 'floor'), 1, { ...i, warmup: 0 }) * 1000;
    const point =
      Math.min(SWEEP_WARMUP_MS, i.durationMs) + Math.max(i.durationMs, i.minRequests * cost) + cost;
    ms += i.configs * i.concurrencies.length * point;
  }
  const steps = i.configs * (1 + i.cases.length * i.concurrencies.length) + 2 * i.cases.length;
  return { steps, estimateS: ms / 1000 + i.configs * SERVER_START_S };
}

export function planColdStart(i: ColdStartPlanInput): SuitePlan {
  let ms = 0;
  for (const id of i.cases) ms += 2 * (i.requests + 1) * costMs(id, 'grpc-tensor-content');
  return { steps: 2 * (1 + i.cases.length), estimateS: ms / 1000 + 2 * SERVER_START_S };
}

/**
 * Every capacity point counted (the search usually stops earlier, so this is an upper
 * bound), plus the settle time, the open loop with a second to drain, and the time after.
 */
export function planOverload(i: OverloadPlanInput): SuitePlan {
  const runs = i.cases.length * i.protocols;
  const capacityMs =
    i.capacityConcurrencies.length *
    (Math.min(CAPACITY_WARMUP_MS, i.capacityDurationMs) + i.capacityDurationMs);
  const runMs = capacityMs + i.settleMs + i.durationMs + 1000 + i.afterMs;
  return {
    steps: runs * overloadRunSteps(i),
    estimateS: runs * (runMs / 1000 + SERVER_START_S),
  };
}

/** Per case: capacity (two loops) and single-request latency, 1 and 4 streams, latest at 2×; one server. */
export function planStream(i: StreamPlanInput): SuitePlan {
  return {
    steps: 4 * i.cases.length,
    estimateS: (i.cases.length * 5 * i.durationMs) / 1000 + SERVER_START_S,
  };
}

export function planBench(parts: {
  readonly latency?: LatencyPlanInput;
  readonly sweep?: SweepPlanInput;
  readonly coldStart?: ColdStartPlanInput;
  readonly overload?: OverloadPlanInput;
  readonly stream?: StreamPlanInput;
}): BenchPlan {
  const latency = parts.latency ? planLatency(parts.latency) : undefined;
  const sweep = parts.sweep ? planSweep(parts.sweep) : undefined;
  const coldStart = parts.coldStart ? planColdStart(parts.coldStart) : undefined;
  const overload = parts.overload ? planOverload(parts.overload) : undefined;
  const stream = parts.stream ? planStream(parts.stream) : undefined;
  const all = [latency, sweep, coldStart, overload, stream].filter((p): p is SuitePlan => p !== undefined);
  return {
    ...(latency ? { latency } : {}),
    ...(sweep ? { sweep } : {}),
    ...(coldStart ? { coldStart } : {}),
    ...(overload ? { overload } : {}),
    ...(stream ? { stream } : {}),
    steps: all.reduce((n, p) => n + p.steps, 0),
    estimateS: all.reduce((n, p) => n + p.estimateS, 0),
  };
}

/** "42 s", "3 min 5 s", "1 h 2 min". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function clock(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const m = Math.floor(s / 60);
  return m >= 60
    ? `${Math.floor(m / 60)}:${String(m % 60).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`
    : `${m}:${String(s % 60).padStart(2, '0')}`;
}

export interface StepCounter {
  /** Counts a step and labels it: `[k/N, m:ss elapsed, ~m:ss left] text`. */
  next(text: string): string;
  /** Labels text with the current step without counting (ticks within a block). */
  current(text: string): string;
}

/** `now` in ms (default performance.now); `left` is the estimate minus the time spent, while positive. */
export function createStepCounter(
  total: number,
  estimateS: number,
  now: () => number = () => performance.now(),
): StepCounter {
  const t0 = now();
  let k = 0;
  const prefix = (): string => {
    const elapsed = (now() - t0) / 1000;
    const left = estimateS - elapsed;
    return `[${k}/${total}, ${clock(elapsed)} elapsed${left > 0 ? `, ~${clock(left)} left` : ''}]`;
  };
  return {
    next(text) {
      k = Math.min(total, k + 1);
      return `${prefix()} ${text}`;
    },
    current: (text) => `${prefix()} ${text}`,
  };
}
