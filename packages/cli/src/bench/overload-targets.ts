/**
 * The overload test's targets, checked on one run. Above capacity (issues 9 and 31): goodput
 * ≥ 80 % of capacity, p99 of accepted requests ≤ 3× the p99 at capacity, every request not
 * answered OK refused with UNAVAILABLE / RESOURCE_EXHAUSTED (gRPC) or 503 (REST) within 50 ms,
 * server RSS ≤ idle + 300 MiB during the load and within 10 % of idle after it. Below capacity
 * (a soak, issue 31): every request answered OK, RSS of the last window within 5 % of the
 * first, accepted p99 of the last window within 20 % of the first.
 */
import type { OverloadRun, OverloadTarget, OverloadWindow } from './bench-results.js';

export const OVERLOAD_LIMITS = {
  goodputRatio: 0.8,
  acceptedP99Ratio: 3,
  rejectionMs: 50,
  rssGrowthMiB: 300,
  rssAfterRatio: 1.1,
} as const;

export const SOAK_LIMITS = {
  rssGrowthRatio: 1.05,
  p99DriftRatio: 1.2,
} as const;

const fmt = (v: number, digits = 1): string => (Number.isFinite(v) ? v.toFixed(digits) : '—');

/** The targets of a run: the soak's when it offered less than its capacity, the overload's otherwise. */
export function evaluateOverloadTargets(
  run: Pick<OverloadRun, 'protocol' | 'capacity' | 'open' | 'rss' | 'windows'>,
  factor: number,
): OverloadTarget[] {
  if (factor < 1) return evaluateSoakTargets(run);
  const out: OverloadTarget[] = [];
  const { capacity, open, rss } = run;
  if (!capacity || !open) return out;
  const L = OVERLOAD_LIMITS;
  out.push({
    id: 'goodput',
    target: `goodput ≥ ${L.goodputRatio * 100} % of capacity`,
    measured: `${fmt(open.goodput)} of ${fmt(capacity.throughput)} req/s (${fmt(open.goodputRatio * 100, 0)} %)`,
    pass: open.goodputRatio >= L.goodputRatio,
  });
  out.push({
    id: 'accepted-p99',
    target: `accepted p99 ≤ ${L.acceptedP99Ratio}× p99 at capacity`,
    measured: `${fmt(open.accepted.p99)} vs ${fmt(capacity.p99)} ms (${fmt(open.acceptedP99Ratio, 2)}×)`,
    pass: open.accepted.n > 0 && open.acceptedP99Ratio <= L.acceptedP99Ratio,
  });
  const c = open.counts;
  const notShed = (c['shed-429'] ?? 0) + (c.deadline ?? 0) + (c.timeout ?? 0) + (c.error ?? 0);
  const shedWith = run.protocol === 'grpc' ? 'UNAVAILABLE / RESOURCE_EXHAUSTED' : '503';
  out.push({
    id: 'rejected-as-shed',
    target: `every request not answered OK gets ${shedWith}`,
    measured: `${c.shed ?? 0} shed, ${notShed} otherwise (${c['shed-429'] ?? 0} 429, ${c.deadline ?? 0} deadline, ${c.timeout ?? 0} timeout, ${c.error ?? 0} error)`,
    pass: notShed === 0,
  });
  const r = open.rejection;
  out.push({
    id: 'rejection-time',
    target: `every refusal within ${L.rejectionMs} ms`,
    measured: r.n === 0 ? 'no refusals' : `p99 ${fmt(r.p99)} ms, max ${fmt(r.max)} ms over ${r.n} refusals`,
    pass: r.n === 0 || r.max <= L.rejectionMs,
  });
  if (rss) {
    out.push({
      id: 'rss-peak',
      target: `RSS ≤ idle + ${L.rssGrowthMiB} MiB during the load`,
      measured: `peak ${fmt(rss.peakMiB, 0)} MiB, idle ${fmt(rss.idleMiB, 0)} MiB (+${fmt(rss.peakMiB - rss.idleMiB, 0)})`,
      pass: rss.peakMiB <= rss.idleMiB + L.rssGrowthMiB,
    });
    out.push({
      id: 'rss-after',
      target: `RSS within ${Math.round((L.rssAfterRatio - 1) * 100)} % of idle ${Math.round(rss.afterMs / 1000)} s after`,
      measured: `${fmt(rss.afterMiB, 0)} MiB (${fmt((rss.afterMiB / rss.idleMiB - 1) * 100, 0)} % over idle)`,
      pass: rss.afterMiB <= rss.idleMiB * L.rssAfterRatio,
    });
  }
  return out;
}

/** A soak: nothing fails, and the last window's RSS and accepted p99 stay near the first's. */
export function evaluateSoakTargets(run: Pick<OverloadRun, 'open' | 'windows'>): OverloadTarget[] {
  const { open, windows } = run;
  if (!open || !windows || windows.length < 2) return [];
  const first = windows[0]!;
  const last = windows.at(-1)!;
  const failed = open.sent - (open.counts.ok ?? 0);
  const span = (w: OverloadWindow): string => `${fmt(w.fromS / 60)}–${fmt(w.toS / 60)} min`;
  const rssRatio = last.rssMiB / first.rssMiB;
  const p99Ratio = last.p99 / first.p99;
  const L = SOAK_LIMITS;
  return [
    {
      id: 'soak-failed',
      target: 'every request answered OK',
      measured: `${failed} of ${open.sent} not OK`,
      pass: failed === 0,
    },
    {
      id: 'soak-rss-growth',
      target: `RSS growth < ${Math.round((L.rssGrowthRatio - 1) * 100)} % (median, last window against the first)`,
      measured: `${fmt(first.rssMiB, 0)} MiB (${span(first)}) → ${fmt(last.rssMiB, 0)} MiB (${span(last)}): ${fmt((rssRatio - 1) * 100)} %`,
      pass: rssRatio < L.rssGrowthRatio,
    },
    {
      id: 'soak-p99-drift',
      target: `accepted p99 drift < ${Math.round((L.p99DriftRatio - 1) * 100)} % (last window against the first)`,
      measured: `${fmt(first.p99)} ms → ${fmt(last.p99)} ms: ${fmt((p99Ratio - 1) * 100)} %`,
      pass: p99Ratio < L.p99DriftRatio,
    },
  ];
}
