/**
 * The overload test's open loop: requests arrive at a given mean rate whatever happens to
 * earlier ones (Poisson arrivals from a seeded generator, or evenly spaced), and each
 * request's scheduled time, actual send time, end time and outcome are recorded. Latency
 * counts from the scheduled time (a late send is charged to the request: no coordinated
 * omission); the send lag is kept apart so that a saturated generator shows.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Shooter, ShotOutcome } from './overload-shooters.js';
import { ownCpuMs } from './proc-cpu.js';

export type Arrivals = 'poisson' | 'fixed';

/** Distinct refusal and error messages kept (further kinds are counted as "(other messages)"). */
export const MAX_MESSAGES = 20;

/** A message with its numbers replaced by `#`, so that messages of one kind count together. */
export function messageKind(text: string): string {
  return text.replace(/\d+(\.\d+)?/g, '#');
}

export const OUTCOMES: readonly ShotOutcome[] = ['ok', 'shed', 'shed-429', 'deadline', 'timeout', 'error'];

/** Arrival times in [0, durationMs), ms from the start, ascending. */
export function arrivalTimes(
  ratePerSecond: number,
  durationMs: number,
  arrivals: Arrivals,
  seed = 1,
): number[] {
  const out: number[] = [];
  const meanMs = 1000 / ratePerSecond;
  if (arrivals === 'fixed') {
    for (let t = 0; t < durationMs; t += meanMs) out.push(t);
    return out;
  }
  const random = mulberry32(seed);
  let t = 0;
  for (;;) {
    // Exponential inter-arrival times; 1 - u is in (0, 1].
    t += -Math.log(1 - random()) * meanMs;
    if (t >= durationMs) return out;
    out.push(t);
  }
}

/** A small seeded PRNG (uniform in [0, 1)), so that runs offer the same arrivals. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface OpenLoopOptions {
  readonly ratePerSecond: number;
  readonly durationMs: number;
  readonly arrivals: Arrivals;
  /** Seed of the Poisson arrivals. Default 1. */
  readonly seed?: number;
  /** Called about once a second while requests are sent or outstanding. */
  readonly onProgress?: (p: OpenLoopProgress) => void;
}

export interface OpenLoopProgress {
  readonly sent: number;
  readonly total: number;
  readonly ok: number;
  readonly shed: number;
  readonly other: number;
  readonly outstanding: number;
}

/** Per request (index = arrival order), times in ms from the loop's start. */
export interface OpenLoopResult {
  readonly scheduledMs: Float64Array;
  readonly sentMs: Float64Array;
  readonly doneMs: Float64Array;
  /** Index into OUTCOMES. */
  readonly outcome: Uint8Array;
  /** Count per exact label (`OK`, `UNAVAILABLE`, `HTTP 503`, `transport: ...`). */
  readonly labels: Readonly<Record<string, number>>;
  /** Count per message of the answers not OK, numbers replaced by `#` (at most MAX_MESSAGES kinds). */
  readonly messages: Readonly<Record<string, number>>;
  /** performance.now() at the loop's start. */
  readonly startedAt: number;
  /** From the start to the last settled request, ms. */
  readonly wallMs: number;
  readonly peakOutstanding: number;
  /** This process's CPU time during the loop, ms. */
  readonly clientCpuMs: number;
  /** This process's event-loop delay during the loop, ms (p99, max). */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
}

export function runOpenLoop(shooter: Shooter, options: OpenLoopOptions): Promise<OpenLoopResult> {
  const times = arrivalTimes(options.ratePerSecond, options.durationMs, options.arrivals, options.seed ?? 1);
  const n = times.length;
  const scheduledMs = Float64Array.from(times);
  const sentMs = new Float64Array(n);
  const doneMs = new Float64Array(n);
  const outcome = new Uint8Array(n);
  const labels: Record<string, number> = {};
  const messages: Record<string, number> = {};
  const counts = [0, 0, 0, 0, 0, 0];
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const cpu0 = ownCpuMs();
  const t0 = performance.now();
  let next = 0;
  let settled = 0;
  let peak = 0;

  return new Promise((resolve) => {
    const progress = options.onProgress
      ? setInterval(() => {
          options.onProgress!({
            sent: next,
            total: n,
            ok: counts[0]!,
            shed: counts[1]!,
            other: settled - counts[0]! - counts[1]!,
            outstanding: shooter.outstanding,
          });
        }, 1000)
      : undefined;
    progress?.unref();
    const finish = (): void => {
      if (progress) clearInterval(progress);
      delay.disable();
      resolve({
        scheduledMs,
        sentMs,
        doneMs,
        outcome,
        labels,
        messages,
        startedAt: t0,
        wallMs: performance.now() - t0,
        peakOutstanding: peak,
        clientCpuMs: ownCpuMs() - cpu0,
        loopDelayP99Ms: delay.percentile(99) / 1e6,
        loopDelayMaxMs: delay.max / 1e6,
      });
    };
    if (n === 0) {
      finish();
      return;
    }
    const fire = (i: number): void => {
      sentMs[i] = performance.now() - t0;
      shooter.fire((r) => {
        doneMs[i] = performance.now() - t0;
        const k = OUTCOMES.indexOf(r.outcome);
        outcome[i] = k;
        counts[k]!++;
        labels[r.label] = (labels[r.label] ?? 0) + 1;
        if (r.message !== undefined) {
          let kind = `${r.label}: ${messageKind(r.message)}`;
          if (!(kind in messages) && Object.keys(messages).length >= MAX_MESSAGES) kind = '(other messages)';
          messages[kind] = (messages[kind] ?? 0) + 1;
        }
        if (++settled === n) finish();
      });
      peak = Math.max(peak, shooter.outstanding);
    };
    const tick = (): void => {
      const now = performance.now() - t0;
      while (next < n && times[next]! <= now) fire(next++);
      if (next < n) setTimeout(tick, Math.max(0, times[next]! - (performance.now() - t0)));
    };
    tick();
  });
}
