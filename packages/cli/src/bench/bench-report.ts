/** The benchmark's Markdown report. */
import type { BenchReport, BenchRow, PathId } from './run-bench.js';

export function formatMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 10) return ms.toFixed(2);
  if (ms < 100) return ms.toFixed(1);
  return ms.toFixed(0);
}

export function formatBytes(bytes: number | undefined): string {
  if (bytes === undefined) return '—';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function ratio(r: number | undefined): string {
  if (r === undefined || !Number.isFinite(r)) return '—';
  return `${r < 10 ? r.toFixed(2) : r.toFixed(1)}×`;
}

function num(v: number | undefined, digits = 1): string {
  return v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits);
}

function p50Cell(row: BenchRow): string {
  const base = formatMs(row.latency?.p50);
  const rounds = row.roundP50s ?? [];
  if (rounds.length < 2) return base;
  return `${base} (${formatMs(Math.min(...rounds))}–${formatMs(Math.max(...rounds))})`;
}

export function pathLabel(report: BenchReport, id: PathId): string {
  return report.paths.find((p) => p.id === id)?.label ?? id;
}

/** Markdown: one section per case with a closed-loop and an open-loop table, then notes. */
export function formatMarkdown(report: BenchReport): string {
  const m = report.meta;
  const o = m.options;
  const lines: string[] = [];
  lines.push(`## visionserve benchmark (${m.date.slice(0, 19).replace('T', ' ')} UTC)`);
  lines.push('');
  lines.push(
    `${m.cpu}, ${m.cores} cores, Node ${m.node}; ${m.mode} server${m.serverArgs.length > 0 ? ` (${m.serverArgs.join(' ')})` : ''}. ` +
      `Each block: ${(o.durationMs / 1000).toFixed(1)} s, at least ${o.minRequests} and at most ${o.maxRequests} requests, after ${o.warmup} warm-up requests; ` +
      `${o.repeat} round${o.repeat === 1 ? '' : 's'}. The floor is measured before and after each case's paths; its p50/p99 are the medians of those blocks. ` +
      `Ratios divide a path's percentile by the floor's. Whole run: ${m.durationS.toFixed(0)} s.`,
  );
  for (const c of report.cases) {
    lines.push('', `### ${c.title}`, '', `Request: ${c.request}.`, '');
    const closed = report.rows.filter((r) => r.case === c.id && r.mode === 'closed');
    if (closed.length > 0) {
      lines.push(`Closed loop, concurrency ${o.concurrency}:`, '');
      lines.push(
        '| path | p50 ms | p90 | p95 | p99 | mean | req/s | p50 ×floor | p99 ×floor | request | response | client CPU ms/req | server CPU ms/req | n |',
      );
      lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
      for (const r of closed) lines.push(rowLine(report, r, false));
    }
    const open = report.rows.filter((r) => r.case === c.id && r.mode === 'open');
    if (open.length > 0) {
      const rateText =
        o.ratePerSecond !== undefined
          ? `${o.ratePerSecond} req/s`
          : `${Math.round(o.rateFraction * 100)} % of the path's closed-loop throughput`;
      lines.push(
        '',
        `Open loop at a fixed arrival rate (${rateText}); latency from each request's scheduled send time:`,
        '',
      );
      lines.push(
        '| path | rate/s | p50 ms | p90 | p95 | p99 | mean | done/s | p50 ×floor | p99 ×floor | client CPU ms/req | server CPU ms/req | n |',
      );
      lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
      for (const r of open) lines.push(rowLine(report, r, true));
    }
  }
  lines.push('', '### Paths', '');
  for (const p of report.paths) lines.push(`- **${p.label}**: ${p.description}.`);
  lines.push(
    '',
    'CPU: client = this load-generator process (encode request, decode answer into tensors); server = the server process(es) from /proc. ' +
      'In-process runs in one process, so its CPU is all "server". p99 of a block with fewer than 100 requests is its maximum.',
  );
  return lines.join('\n') + '\n';
}

function rowLine(report: BenchReport, r: BenchRow, open: boolean): string {
  const label = pathLabel(report, r.path);
  if (r.skipped !== undefined) {
    const cols = open ? 12 : 13;
    return `| ${label} | skipped: ${r.skipped.replaceAll('|', '/')} ${'| '.repeat(cols)}|`;
  }
  const l = r.latency!;
  const errors = r.errors ? ` (${r.errors} errors)` : '';
  if (open) {
    return `| ${label} | ${num(r.ratePerSecond)} | ${p50Cell(r)} | ${formatMs(l.p90)} | ${formatMs(l.p95)} | ${formatMs(l.p99)} | ${formatMs(l.mean)} | ${num(r.throughput)} | ${ratio(r.ratioP50)} | ${ratio(r.ratioP99)} | ${num(r.clientCpuMsPerRequest, 2)} | ${num(r.serverCpuMsPerRequest, 2)} | ${l.n}${errors} |`;
  }
  return `| ${label} | ${p50Cell(r)} | ${formatMs(l.p90)} | ${formatMs(l.p95)} | ${formatMs(l.p99)} | ${formatMs(l.mean)} | ${num(r.throughput)} | ${ratio(r.ratioP50)} | ${ratio(r.ratioP99)} | ${formatBytes(r.requestBytes)} | ${formatBytes(r.responseBytes)} | ${num(r.clientCpuMsPerRequest, 2)} | ${num(r.serverCpuMsPerRequest, 2)} | ${l.n}${errors} |`;
}
