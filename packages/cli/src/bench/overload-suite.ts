/**
 * The overload test (issue 9): per protocol (gRPC Predict with a `tensor_content` request,
 * REST `:predict` with TF Serving JSON) a fresh server process, its capacity measured with
 * closed loops of rising concurrency until the throughput stops rising, then an open loop
 * at `factor` × that capacity for `durationMs`, and the server's RSS sampled from before
 * the load until `afterMs` after its last answer. Requests are encoded once; the generator
 * only sends them and classifies the answers (overload-shooters.ts).
 */
import { loadavg } from 'node:os';
import { encodeTfsPredictRequest } from '@visionserve/protocol';
import { create } from '@bufbuild/protobuf';
import { PredictRequestSchema, writePredictRequest } from '@visionserve/protocol/tfs-proto';
import type { BenchCase } from './bench-cases.js';
import type { BenchProgress } from './bench-progress.js';
import type { OverloadCapacityPoint, OverloadReport, OverloadRun } from './bench-results.js';
import { pinThisProcess, pinnedCommand } from './cpu-affinity.js';
import type { ExitCleanup } from './exit-cleanup.js';
import { closedLoop } from './load-loop.js';
import { type Arrivals, OUTCOMES, type OpenLoopResult, runOpenLoop } from './overload-loop.js';
import { type Shooter, type ShotResult, createGrpcShooter, createRestShooter } from './overload-shooters.js';
import { evaluateOverloadTargets } from './overload-targets.js';
import { SOAK_WINDOWS, openLoopWindows } from './overload-windows.js';
import { ownCpuMs, processCpuMs } from './proc-cpu.js';
import { readRssBytes, startRssSampler, type RssSample } from './process-memory.js';
import { type ServerProcess, startServerProcess } from './server-process.js';
import { median, summarize } from './stats.js';

export type OverloadProtocol = 'grpc' | 'rest';
export const OVERLOAD_PROTOCOLS: readonly OverloadProtocol[] = ['grpc', 'rest'];

/** Untimed closed loop before each capacity point, ms (at most the point's duration). */
export const CAPACITY_WARMUP_MS = 500;
/** The RSS median over the last this-many ms of the settle time is "idle". */
const IDLE_WINDOW_MS = 2000;
const RSS_INTERVAL_MS = 100;
/** A capacity point raises the best throughput by less than this: no gain. */
const PLATEAU_GAIN = 1.05;
/** The point "at capacity" is the smallest concurrency within this fraction of the best. */
const AT_CAPACITY = 0.95;

export interface OverloadOptions {
  /** Protocols, in this order. Default grpc, rest. */
  readonly protocols: readonly OverloadProtocol[];
  /** Offered rate = factor × measured capacity. Default 3. */
  readonly factor: number;
  /** Open loop: arrivals for this long, ms. Default 30000. */
  readonly durationMs: number;
  /** RSS is followed this long after the last answer, ms. Default 15000 (issue 31's "back within 10 % after 15 s"). */
  readonly afterMs: number;
  /** Each capacity point runs this long, ms. Default 4000. */
  readonly capacityDurationMs: number;
  /** Closed-loop concurrencies tried, ascending; the search stops after two points without gain. */
  readonly capacityConcurrencies: readonly number[];
  /** Poisson (default) or evenly spaced arrivals. */
  readonly arrivals: Arrivals;
  /** Per request (gRPC: also sent as grpc-timeout), ms. Default 10000. */
  readonly timeoutMs: number;
  /**
   * HTTP/2 connections the gRPC requests are spread over (round robin). Default 1, as one gRPC
   * channel; more separate the server's refusal time from the queue on one connection.
   */
  readonly grpcConnections: number;
  /**
   * REST: send `Expect: 100-continue` and the body only once the server asks for it, as curl
   * does for bodies over 1 MB (a refusal then costs no upload). Default false.
   */
  readonly restExpectContinue: boolean;
  /** Quiet time between the capacity search and the open loop; idle RSS is taken in its last 2 s, ms. Default 3000. */
  readonly settleMs: number;
  /** Start the server on these CPUs (taskset list). Default: not pinned. */
  readonly serverCpus?: string | undefined;
  /** Move the load generator to these CPUs for the suite. Default: not pinned. */
  readonly clientCpus?: string | undefined;
}

export const DEFAULT_OVERLOAD: OverloadOptions = {
  protocols: OVERLOAD_PROTOCOLS,
  factor: 3,
  durationMs: 30_000,
  afterMs: 15_000,
  capacityDurationMs: 4000,
  capacityConcurrencies: [1, 2, 4, 8, 16, 32],
  arrivals: 'poisson',
  timeoutMs: 10_000,
  grpcConnections: 1,
  restExpectContinue: false,
  settleMs: 3000,
};

/** `--overload-soak`: 30 minutes at 0.7× capacity (issue 31), judged by windows (overload-targets.ts). */
export const SOAK_OVERLOAD: Partial<OverloadOptions> = {
  factor: 0.7,
  durationMs: 30 * 60_000,
  afterMs: 15_000,
};

export interface OverloadSuiteOptions extends OverloadOptions {
  readonly cases: readonly BenchCase[];
  /** Flags for every server (model config file, --server-arg values: admission limits). */
  readonly serverFlags: readonly string[];
  readonly cleanup: ExitCleanup;
  readonly progress: BenchProgress;
}

const MiB = 1024 * 1024;
const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const round = (values: readonly number[]): number[] => values.map((v) => Math.round(v * 100) / 100);

/** Progress steps of one run: server start, capacity points, settle, open loop, after. */
export function overloadRunSteps(o: Pick<OverloadOptions, 'capacityConcurrencies'>): number {
  return 1 + o.capacityConcurrencies.length + 3;
}

function requestBody(c: BenchCase, protocol: OverloadProtocol): Uint8Array {
  if (protocol === 'rest') return encodeTfsPredictRequest(c.inputs, 'row');
  const chunks = writePredictRequest(
    create(PredictRequestSchema, { modelSpec: { name: c.model } }),
    c.inputs,
    true,
  );
  return Buffer.concat(chunks);
}

function shooterFor(
  server: ServerProcess,
  c: BenchCase,
  protocol: OverloadProtocol,
  body: Uint8Array,
  o: Pick<OverloadOptions, 'timeoutMs' | 'grpcConnections' | 'restExpectContinue'>,
): Shooter {
  return protocol === 'grpc'
    ? createGrpcShooter({
        address: `127.0.0.1:${server.grpcPort}`,
        path: '/tensorflow.serving.PredictionService/Predict',
        message: body,
        timeoutMs: o.timeoutMs,
        connections: o.grpcConnections,
      })
    : createRestShooter({
        address: `127.0.0.1:${server.restPort}`,
        path: `/v1/models/${c.model}:predict`,
        body,
        timeoutMs: o.timeoutMs,
        expectContinue: o.restExpectContinue,
      });
}

const fireOnce = (shooter: Shooter): Promise<ShotResult> =>
  new Promise((resolve) => {
    shooter.fire(resolve);
  });

export async function runOverloadSuite(o: OverloadSuiteOptions): Promise<OverloadReport> {
  const runs: OverloadRun[] = [];
  const restore = o.clientCpus !== undefined ? pinThisProcess(o.clientCpus) : undefined;
  try {
    for (const c of o.cases) for (const protocol of o.protocols) runs.push(await runOne(o, c, protocol));
  } finally {
    restore?.();
  }
  return {
    factor: o.factor,
    durationMs: o.durationMs,
    afterMs: o.afterMs,
    arrivals: o.arrivals,
    timeoutMs: o.timeoutMs,
    capacityDurationMs: o.capacityDurationMs,
    capacityConcurrencies: o.capacityConcurrencies,
    settleMs: o.settleMs,
    ...(o.serverCpus !== undefined ? { serverCpus: o.serverCpus } : {}),
    ...(o.clientCpus !== undefined ? { clientCpus: o.clientCpus } : {}),
    runs,
  };
}

type Capacity = NonNullable<OverloadRun['capacity']>;

/** Progress steps of one run: each announced, the rest marked skipped when the run stops early. */
interface RunSteps {
  readonly label: string;
  step(text: string): void;
  skipRest(why: string): void;
}

function runSteps(o: OverloadSuiteOptions, label: string): RunSteps {
  const steps = overloadRunSteps(o);
  let stepsDone = 0;
  const step = (text: string): void => {
    stepsDone++;
    o.progress.step(`${label} · ${text}`);
  };
  return {
    label,
    step,
    skipRest: (why) => {
      while (stepsDone < steps) step(`skipped (${why})`);
    },
  };
}

/** One capacity point: a short warmup, then a timed closed loop at `concurrency`. */
async function capacityPoint(
  o: OverloadSuiteOptions,
  server: ServerProcess,
  send: () => Promise<ShotResult>,
  concurrency: number,
  label: string,
): Promise<OverloadCapacityPoint> {
  await closedLoop(send, concurrency, {
    durationMs: Math.min(CAPACITY_WARMUP_MS, o.capacityDurationMs),
    minRequests: concurrency,
    maxRequests: Number.MAX_SAFE_INTEGER,
  });
  const cpuBefore = await processCpuMs(server.pid);
  const clientBefore = ownCpuMs();
  const r = await closedLoop(send, concurrency, {
    durationMs: o.capacityDurationMs,
    minRequests: concurrency,
    maxRequests: Number.MAX_SAFE_INTEGER,
    onProgress: (n) => {
      o.progress.tick(`${label} · capacity c=${concurrency} · ${n} req`);
    },
  });
  const cpuAfter = await processCpuMs(server.pid);
  const clientCpuMs = ownCpuMs() - clientBefore;
  const throughput = r.wallMs > 0 ? (r.latenciesMs.length * 1000) / r.wallMs : 0;
  const done = r.latenciesMs.length + r.errors;
  return {
    concurrency,
    throughput,
    latency: summarize(r.latenciesMs),
    errors: r.errors,
    ...(cpuBefore !== undefined && cpuAfter !== undefined && done > 0
      ? { serverCpuMsPerRequest: (cpuAfter - cpuBefore) / done }
      : {}),
    ...(done > 0 ? { clientCpuMsPerRequest: clientCpuMs / done } : {}),
    ...(r.firstError !== undefined ? { firstError: r.firstError } : {}),
  };
}

/** Capacity: closed loops of rising concurrency until two points bring no gain. */
async function measureCapacity(
  o: OverloadSuiteOptions,
  server: ServerProcess,
  shooter: Shooter,
  steps: RunSteps,
): Promise<{ capacity: Capacity; at: OverloadCapacityPoint }> {
  const send = (): Promise<ShotResult> =>
    new Promise((resolve, reject) => {
      shooter.fire((r) => {
        if (r.outcome === 'ok') resolve(r);
        else reject(new Error(r.label));
      });
    });
  const points: OverloadCapacityPoint[] = [];
  let best = 0;
  let stale = 0;
  for (const concurrency of o.capacityConcurrencies) {
    if (stale >= 2) {
      steps.step(`capacity c=${concurrency} · not needed (plateau reached)`);
      continue;
    }
    steps.step(`capacity c=${concurrency}`);
    const point = await capacityPoint(o, server, send, concurrency, steps.label);
    points.push(point);
    stale = point.throughput >= best * PLATEAU_GAIN ? 0 : stale + 1;
    best = Math.max(best, point.throughput);
  }
  const at = points.find((p) => p.throughput >= best * AT_CAPACITY)!;
  return {
    capacity: {
      points,
      throughput: best,
      concurrency: at.concurrency,
      p50: at.latency.p50,
      p99: at.latency.p99,
    },
    at,
  };
}

/** What the load phases measured: the open loop, the server's CPU over it, RSS throughout. */
interface LoadPhases {
  readonly open: OpenLoopResult;
  readonly serverCpuMs: number | undefined;
  readonly afterMiB: number;
  readonly openStart: number;
  readonly idleSamples: RssSample[];
  readonly samples: readonly RssSample[];
}

/** Idle reference, then the open loop, then the time after it; RSS sampled throughout. */
async function runLoadPhases(
  o: OverloadSuiteOptions,
  server: ServerProcess,
  shooter: Shooter,
  best: number,
  steps: RunSteps,
): Promise<LoadPhases> {
  steps.step(`settle ${o.settleMs / 1000} s (idle RSS)`);
  const sampler = startRssSampler(server.pid, RSS_INTERVAL_MS);
  try {
    const settleStart = performance.now();
    await sleep(o.settleMs);
    const idleSamples = sampler.since(settleStart + Math.max(0, o.settleMs - IDLE_WINDOW_MS));
    const rate = o.factor * best;
    steps.step(
      `open loop ${o.factor}× capacity = ${rate.toFixed(0)} req/s (${o.arrivals}) for ${o.durationMs / 1000} s`,
    );
    const cpu0 = await processCpuMs(server.pid);
    const open = await runOpenLoop(shooter, {
      ratePerSecond: rate,
      durationMs: o.durationMs,
      arrivals: o.arrivals,
      onProgress: (p) => {
        o.progress.tick(
          `${steps.label} · open loop · sent ${p.sent}/${p.total} · ok ${p.ok} · shed ${p.shed} · other ${p.other} · outstanding ${p.outstanding}`,
        );
      },
    });
    const cpu1 = await processCpuMs(server.pid);
    const serverCpuMs = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined;
    steps.step(`after the load (${o.afterMs / 1000} s, RSS)`);
    await sleep(o.afterMs);
    const afterMiB = (readRssBytes(server.pid) ?? NaN) / MiB;
    return { open, serverCpuMs, afterMiB, openStart: open.startedAt, idleSamples, samples: sampler.samples };
  } finally {
    sampler.stop();
  }
}

/** The open loop's outcomes: counts, goodput, latencies of accepted and refused requests. */
function openSummary(
  o: OverloadSuiteOptions,
  phases: LoadPhases,
  capacity: Capacity,
  at: OverloadCapacityPoint,
  connections: number,
): NonNullable<OverloadRun['open']> {
  const { open, serverCpuMs } = phases;
  const best = capacity.throughput;
  const n = open.scheduledMs.length;
  const accepted: number[] = [];
  const refusals: number[] = [];
  const lag: number[] = [];
  const counts: Record<string, number> = Object.fromEntries(OUTCOMES.map((k) => [k, 0]));
  for (let i = 0; i < n; i++) {
    const outcome = OUTCOMES[open.outcome[i]!]!;
    counts[outcome]!++;
    lag.push(open.sentMs[i]! - open.scheduledMs[i]!);
    if (outcome === 'ok') accepted.push(open.doneMs[i]! - open.scheduledMs[i]!);
    else if (outcome === 'shed' || outcome === 'shed-429') refusals.push(open.doneMs[i]! - open.sentMs[i]!);
  }
  const goodput = (counts.ok! * 1000) / o.durationMs;
  const acceptedSummary = summarize(accepted);
  return {
    ratePerSecond: o.factor * best,
    arrivals: o.arrivals,
    durationMs: o.durationMs,
    sent: n,
    counts,
    labels: open.labels,
    messages: open.messages,
    goodput,
    goodputRatio: goodput / best,
    accepted: acceptedSummary,
    acceptedP99Ratio: acceptedSummary.p99 / capacity.p99,
    rejection: summarize(refusals),
    sendLag: summarize(lag),
    peakOutstanding: open.peakOutstanding,
    connections,
    clientCpuMsPerRequest: n > 0 ? open.clientCpuMs / n : NaN,
    ...(serverCpuMs !== undefined && n > 0 ? { serverCpuMsPerRequest: serverCpuMs / n } : {}),
    ...(serverCpuMs !== undefined && at.serverCpuMsPerRequest !== undefined && n > counts.ok!
      ? {
          serverCpuMsPerRefusal: (serverCpuMs - counts.ok! * at.serverCpuMsPerRequest) / (n - counts.ok!),
        }
      : {}),
    generatorLoopDelayP99Ms: open.loopDelayP99Ms,
    generatorLoopDelayMaxMs: open.loopDelayMaxMs,
    wallMs: open.wallMs,
  };
}

/** RSS: the idle reference, the peak from the open loop on, the value after, one sample per second. */
function rssSummary(
  o: OverloadSuiteOptions,
  phases: LoadPhases,
  startMiB: number,
): NonNullable<OverloadRun['rss']> {
  const { openStart, afterMiB } = phases;
  const during = phases.samples.filter((s) => s.atMs >= openStart);
  const idleMiB = median(phases.idleSamples.map((s) => s.bytes)) / MiB;
  const peakMiB = Math.max(afterMiB, ...during.map((s) => s.bytes / MiB));
  const timeline: [number, number][] = [];
  for (const s of during) {
    const second = Math.floor((s.atMs - openStart) / 1000);
    const mib = Math.round(s.bytes / MiB);
    const last = timeline.at(-1);
    if (last?.[0] === second) last[1] = Math.max(last[1], mib);
    else timeline.push([second, mib]);
  }
  timeline.push([Math.round((performance.now() - openStart) / 100) / 10, Math.round(afterMiB)]);
  return { startMiB, idleMiB, peakMiB, afterMiB, afterMs: o.afterMs, timeline };
}

/** The run against a started server: first request, capacity, load phases. */
async function measureRun(
  o: OverloadSuiteOptions,
  server: ServerProcess,
  shooter: Shooter,
  base: OverloadRun,
  steps: RunSteps,
): Promise<OverloadRun> {
  const startMiB = (readRssBytes(server.pid) ?? NaN) / MiB;
  const first = await fireOnce(shooter);
  if (first.outcome !== 'ok' || first.responseBytes < 1000) {
    steps.skipRest('the first request failed');
    return { ...base, skipped: `first request answered ${first.label} (${first.responseBytes} bytes)` };
  }
  const { capacity, at } = await measureCapacity(o, server, shooter, steps);
  if (!(capacity.throughput > 0)) {
    steps.skipRest('no capacity measured');
    return { ...base, capacity, skipped: 'no request succeeded' };
  }
  const phases = await runLoadPhases(o, server, shooter, capacity.throughput, steps);
  const run: OverloadRun = {
    ...base,
    capacity,
    open: openSummary(o, phases, capacity, at, shooter.connections),
    rss: rssSummary(o, phases, startMiB),
    windows: openLoopWindows(phases.open, phases.samples, o.durationMs, SOAK_WINDOWS),
    loadAverageAfter: round(loadavg()),
  };
  return { ...run, targets: evaluateOverloadTargets(run, o.factor) };
}

async function runOne(
  o: OverloadSuiteOptions,
  c: BenchCase,
  protocol: OverloadProtocol,
): Promise<OverloadRun> {
  const steps = runSteps(o, `overload · ${protocol} · ${c.id}`);
  const serverArgs = o.serverFlags.filter((f) => !f.startsWith('--model_config_file='));
  const base = {
    case: c.id,
    protocol,
    ...(protocol === 'rest' && o.restExpectContinue ? { expectContinue: true } : {}),
    serverArgs,
    loadAverageBefore: round(loadavg()),
  };
  steps.step('starting server');
  let server: ServerProcess;
  try {
    server = await startServerProcess(o.serverFlags, {
      cleanup: o.cleanup,
      ...(o.serverCpus !== undefined ? { prefix: pinnedCommand(o.serverCpus) } : {}),
    });
  } catch (error) {
    steps.skipRest('server did not start');
    return { ...base, skipped: `server did not start: ${errorText(error)}` };
  }
  const body = requestBody(c, protocol);
  const shooter = shooterFor(server, c, protocol, body, o);
  try {
    return await measureRun(o, server, shooter, { ...base, requestBytes: body.byteLength }, steps);
  } catch (error) {
    steps.skipRest('failed');
    return { ...base, requestBytes: body.byteLength, skipped: `failed: ${errorText(error)}` };
  } finally {
    shooter.close();
    await server.stop();
  }
}
