/**
 * The open loop cut into equal windows by scheduled arrival time: per window the requests
 * sent, answered OK and not, the accepted latency and the server's median RSS. A long run
 * below capacity (a soak) is judged by how its last window compares with its first.
 */
import type { OverloadWindow } from './bench-results.js';
import type { OpenLoopResult } from './overload-loop.js';
import type { RssSample } from './process-memory.js';
import { median, summarize } from './stats.js';

/** Windows a soak is cut into: 30 minutes give six of 5 minutes. */
export const SOAK_WINDOWS = 6;

const MiB = 1024 * 1024;

type WindowInput = Pick<OpenLoopResult, 'scheduledMs' | 'doneMs' | 'outcome' | 'startedAt'>;

/**
 * `count` windows over [0, durationMs) of scheduled time; RSS samples (performance.now()
 * clock) are placed by their time since the loop started. Outcome 0 is OK (OUTCOMES).
 */
export function openLoopWindows(
  open: WindowInput,
  samples: readonly RssSample[],
  durationMs: number,
  count: number,
): OverloadWindow[] {
  const widthMs = durationMs / count;
  const latencies: number[][] = Array.from({ length: count }, () => []);
  const sent = new Array<number>(count).fill(0);
  const failed = new Array<number>(count).fill(0);
  for (let i = 0; i < open.scheduledMs.length; i++) {
    const w = Math.min(count - 1, Math.floor(open.scheduledMs[i]! / widthMs));
    sent[w]!++;
    if (open.outcome[i] === 0) latencies[w]!.push(open.doneMs[i]! - open.scheduledMs[i]!);
    else failed[w]!++;
  }
  const rss: number[][] = Array.from({ length: count }, () => []);
  for (const s of samples) {
    const t = s.atMs - open.startedAt;
    if (t < 0 || t >= durationMs) continue;
    rss[Math.min(count - 1, Math.floor(t / widthMs))]!.push(s.bytes / MiB);
  }
  return latencies.map((l, w) => {
    const summary = summarize(l);
    return {
      fromS: (w * widthMs) / 1000,
      toS: ((w + 1) * widthMs) / 1000,
      sent: sent[w]!,
      ok: l.length,
      failed: failed[w]!,
      p50: summary.p50,
      p99: summary.p99,
      rssMiB: rss[w]!.length > 0 ? median(rss[w]!) : NaN,
    };
  });
}
