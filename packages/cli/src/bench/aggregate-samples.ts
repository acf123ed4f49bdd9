/** Pools the blocks (rounds) of one latency-suite row into its report row. */
import type { BenchRow, FloorReference } from './bench-results.js';
import type { Sample } from './path-runner.js';
import { median, summarize } from './stats.js';

export type RowKey = Pick<BenchRow, 'case' | 'path' | 'mode' | 'concurrency' | 'ratePerSecond'>;

/** Sums a per-block figure; undefined when any block lacks it. */
function sum(list: readonly Sample[], f: (s: Sample) => number | undefined): number | undefined {
  let total = 0;
  for (const s of list) {
    const v = f(s);
    if (v === undefined) return undefined;
    total += v;
  }
  return total;
}

/**
 * Latency percentiles over every request of every block; throughput = requests ÷ summed
 * wall time; CPU per request = summed CPU ÷ requests done (errors included); ratios to the
 * floors when given (`imageFloor` only for rows that have an image floor to compare with).
 */
export function aggregateSamples(
  key: RowKey,
  list: readonly Sample[],
  floor: { readonly p50: number; readonly p99: number } | undefined,
  imageFloor?: { readonly p50: number; readonly p99: number },
): BenchRow {
  const latencies = list.flatMap((s) => s.latenciesMs);
  const latency = summarize(latencies);
  const n = latencies.length;
  const wall = list.reduce((a, s) => a + s.wallMs, 0);
  const errors = list.reduce((a, s) => a + s.errors, 0);
  const client = sum(list, (s) => s.clientCpuMs);
  const server = sum(list, (s) => s.serverCpuMs);
  const gcMs = sum(list, (s) => s.serverGc?.ms);
  const majors = sum(list, (s) => s.serverGc?.majors);
  const reducerMs = sum(list, (s) => s.serverGc?.reducerMs);
  const done = n + errors;
  const wire = list.find((s) => s.wire !== undefined)?.wire;
  const firstError = list.find((s) => s.firstError !== undefined)?.firstError;
  return {
    ...key,
    latency,
    roundP50s: list.map((s) => summarize(s.latenciesMs).p50),
    throughput: wall > 0 ? (n * 1000) / wall : NaN,
    errors,
    ...(firstError !== undefined ? { firstError } : {}),
    ...(wire ? { requestBytes: wire.requestBytes, responseBytes: wire.responseBytes } : {}),
    ...(client !== undefined && done > 0 ? { clientCpuMsPerRequest: client / done } : {}),
    ...(server !== undefined && done > 0 ? { serverCpuMsPerRequest: server / done } : {}),
    ...(gcMs !== undefined && majors !== undefined && done > 0
      ? {
          serverGcMsPerRequest: gcMs / done,
          majorGcsPer1000: (majors * 1000) / done,
          serverReducerGcMsPerRequest: (reducerMs ?? 0) / done,
        }
      : {}),
    ...(floor ? { ratioP50: latency.p50 / floor.p50, ratioP99: latency.p99 / floor.p99 } : {}),
    ...(imageFloor
      ? { ratioImageFloorP50: latency.p50 / imageFloor.p50, ratioImageFloorP99: latency.p99 / imageFloor.p99 }
      : {}),
  };
}

/**
 * A floor's reference from its blocks: p50 and p99 are the medians of the blocks' own
 * percentiles (robust to one noisy block), not percentiles of the pooled latencies.
 */
export function floorReference(blocks: readonly Sample[]): FloorReference {
  const p50s = blocks.map((s) => summarize(s.latenciesMs).p50);
  const p99s = blocks.map((s) => summarize(s.latenciesMs).p99);
  return { p50s, p50: median(p50s), p99: median(p99s) };
}
