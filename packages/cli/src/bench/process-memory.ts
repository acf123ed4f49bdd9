/**
 * Resident memory of a process (Linux /proc/<pid>/status VmRSS), read now or sampled at
 * an interval. Reads are synchronous: a sample is taken when the timer fires, even while
 * the event loop is busy with load generation.
 */
import { readFileSync } from 'node:fs';

/** VmRSS of `pid` in bytes; undefined where /proc is not available or the process is gone. */
export function readRssBytes(pid: number): number | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(text);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export interface RssSample {
  /** performance.now() of the sample, ms. */
  readonly atMs: number;
  readonly bytes: number;
}

export interface RssSampler {
  /** Samples taken so far, oldest first. */
  readonly samples: readonly RssSample[];
  /** Samples taken at or after `fromMs` (performance.now() clock). */
  since(fromMs: number): RssSample[];
  stop(): void;
}

/** Samples `pid`'s RSS now and every `intervalMs` until stopped (samples of a gone process are skipped). */
export function startRssSampler(pid: number, intervalMs: number): RssSampler {
  const samples: RssSample[] = [];
  const take = (): void => {
    const bytes = readRssBytes(pid);
    if (bytes !== undefined) samples.push({ atMs: performance.now(), bytes });
  };
  take();
  const timer = setInterval(take, intervalMs);
  timer.unref();
  return {
    samples,
    since: (fromMs) => samples.filter((s) => s.atMs >= fromMs),
    stop() {
      clearInterval(timer);
    },
  };
}
