/**
 * Server memory per large response in flight (issue 16: "server RSS per message in flight
 * <= 3x its size"): the server's resident set is read once while idle, before it has served
 * any of these answers (so the memory they need, output pool slots included, is not already
 * resident); then for each concurrency its peak mark (VmHWM) is reset
 * (`/proc/<pid>/clear_refs` 5), a short closed loop runs, and (peak − idle) / concurrency is
 * the memory each message in flight took, compared with the response message's size. Linux
 * only; same machine only.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PathRunner } from './path-runner.js';
import { readRssBytes } from './process-memory.js';

export interface RssPerMessagePoint {
  readonly concurrency: number;
  /** VmRSS while idle, before the first of these requests, bytes. */
  readonly idleBytes: number;
  /** VmHWM after the loop (peak since the reset), bytes. */
  readonly peakBytes: number;
  /** (peak − idle) / concurrency, bytes. */
  readonly perMessageBytes: number;
  /** Response message size (gRPC message, without framing), bytes. */
  readonly messageBytes: number;
  readonly requests: number;
}

export interface RssPerMessageOptions {
  readonly runner: PathRunner;
  readonly pid: number;
  /** Concurrencies measured, in order (keep them within the server's admission limits). Default [1, 2]. */
  readonly concurrencies?: readonly number[];
  /** Requests per concurrency level, per request in flight. Default 6. */
  readonly requestsPerSlot?: number;
  /** Quiet time before the idle reading, ms. Default 500. */
  readonly settleMs?: number;
}

/** VmHWM of `pid` in bytes; undefined where unavailable. */
function readPeakRssBytes(pid: number): number | undefined {
  try {
    const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Resets the peak RSS mark of `pid`; false where the kernel or permissions do not allow it. */
function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** The points, or the reason they could not be measured. */
export async function measureRssPerMessage(
  o: RssPerMessageOptions,
): Promise<RssPerMessagePoint[] | { unavailable: string }> {
  const points: RssPerMessagePoint[] = [];
  await sleep(o.settleMs ?? 500);
  const idle = readRssBytes(o.pid);
  if (idle === undefined) return { unavailable: 'no /proc/<pid>/status for the server' };
  for (const concurrency of o.concurrencies ?? [1, 2]) {
    if (!resetPeakRss(o.pid)) return { unavailable: 'cannot reset the peak RSS (/proc/<pid>/clear_refs)' };
    const requests = concurrency * (o.requestsPerSlot ?? 6);
    const sample = await o.runner.runBlock({
      mode: 'closed',
      concurrency,
      ratePerSecond: 0,
      warmup: 0,
      durationMs: 0,
      minRequests: requests,
      maxRequests: requests,
    });
    const peak = readPeakRssBytes(o.pid);
    if (peak === undefined) return { unavailable: 'no VmHWM for the server' };
    if (sample.latenciesMs.length === 0)
      return { unavailable: `every request failed: ${sample.firstError ?? '?'}` };
    points.push({
      concurrency,
      idleBytes: idle,
      peakBytes: peak,
      perMessageBytes: Math.max(0, peak - idle) / concurrency,
      messageBytes: sample.wire?.responseBytes ?? NaN,
      requests: sample.latenciesMs.length,
    });
  }
  return points;
}
