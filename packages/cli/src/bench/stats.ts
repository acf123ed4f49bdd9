/** Latency summaries (nearest-rank percentiles). */
export interface LatencySummary {
  readonly n: number;
  readonly p50: number;
  readonly p90: number;
  readonly p95: number;
  readonly p99: number;
  readonly mean: number;
  readonly max: number;
}

/** Nearest-rank percentile of ascending values; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function summarize(latenciesMs: readonly number[]): LatencySummary {
  const s = Float64Array.from(latenciesMs).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p95: percentile(s, 95),
    p99: percentile(s, 99),
    mean: s.length > 0 ? sum / s.length : NaN,
    max: s.length > 0 ? s[s.length - 1]! : NaN,
  };
}

/** Median of a few numbers (used to combine the floor blocks before and after the paths). */
export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
