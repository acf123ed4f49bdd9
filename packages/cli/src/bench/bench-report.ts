/** The benchmark's Markdown report (results.md): one section per suite that ran. */
import { CASES } from './bench-cases.js';
import type { PathId } from './bench-paths.js';
import { formatDuration } from './bench-plan.js';
import type {
  BenchReport,
  BenchRow,
  CaseReport,
  ColdStartReport,
  SweepReport,
  SweepRow,
} from './bench-results.js';
import { formatOverload } from './overload-report.js';
import { describeSweepConfig, parseSweepConfig } from './sweep-configs.js';
import type { StreamReport } from './stream-suite.js';

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

/** The top-1 of an image floor's JSON answer, e.g. "281 tabby (0.42)". */
function topOne(answer: string | undefined): string | undefined {
  if (answer === undefined) return undefined;
  try {
    const parsed = JSON.parse(answer) as {
      predictions?: { class_id: number; label?: string; score: number }[][];
    };
    const best = parsed.predictions?.[0]?.[0];
    return best
      ? `${best.class_id}${best.label !== undefined ? ` ${best.label}` : ''} (${best.score.toFixed(2)})`
      : undefined;
  } catch {
    return undefined;
  }
}

/** The /invocations row against the image floor, when both ran. */
function imageFloorNote(c: CaseReport, rows: readonly BenchRow[]): string | undefined {
  const inv = rows.find((r) => r.case === c.id && r.path === 'invocations' && r.mode === 'closed');
  const f = c.imageFloor;
  if (!f || !inv?.latency || inv.ratioImageFloorP50 === undefined) return undefined;
  const top = topOne(f.answer);
  return (
    `/invocations against the image floor (the same decode, preprocessing, onnxruntime and top-5 in a worker, no server): ` +
    `p50 ${formatMs(inv.latency.p50)} vs ${formatMs(f.p50)} ms (${ratio(inv.ratioImageFloorP50)}), ` +
    `p99 ${formatMs(inv.latency.p99)} vs ${formatMs(f.p99)} ms (${ratio(inv.ratioImageFloorP99)})` +
    (Number.isFinite(c.floorP50) ? `; onnxruntime alone ${formatMs(c.floorP50)} ms` : '') +
    (top !== undefined ? `. Image floor top-1: ${top}.` : '.')
  );
}

function formatLatency(report: BenchReport, lines: string[]): void {
  const o = report.meta.options;
  lines.push(
    '',
    '### Latency suite',
    '',
    `Each block: ${(o.durationMs / 1000).toFixed(1)} s, at least ${o.minRequests} and at most ${o.maxRequests} requests, after ${o.warmup} warm-up requests${(o.warmupMs ?? 0) > 0 ? ` (served paths: and at least ${((o.warmupMs ?? 0) / 1000).toFixed(1)} s of them)` : ''}; ` +
      `${o.repeat} round${o.repeat === 1 ? '' : 's'}. The floors are measured before and after each round of a case's paths; their p50/p99 are the medians of those blocks. ` +
      `Ratios divide a path's percentile by the raw onnxruntime floor's.`,
  );
  for (const c of report.cases) {
    lines.push('', `#### ${c.title}`, '', `Request: ${c.request}.`, '');
    const closed = report.rows.filter((r) => r.case === c.id && r.mode === 'closed');
    if (closed.length > 0) {
      lines.push(`Closed loop, concurrency ${o.concurrency}:`, '');
      lines.push(
        '| path | p50 ms | p90 | p95 | p99 | mean | req/s | p50 ×floor | p99 ×floor | request | response | client CPU ms/req | server CPU ms/req | server GC ms/req (Mark-Compact /1k) | n |',
      );
      lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
      for (const r of closed) lines.push(rowLine(report, r, false));
    }
    const note = imageFloorNote(c, report.rows);
    if (note !== undefined) lines.push('', note);
    const rss = c.serverRssPerMessage;
    if (rss !== undefined) {
      const mb = (n: number): string => (n / 1e6).toFixed(1);
      lines.push(
        '',
        'unavailable' in rss
          ? `Server RSS per message in flight (gRPC tensor_content): not measured (${rss.unavailable}).`
          : `Server RSS per message in flight (gRPC tensor_content; peak VmHWM above idle VmRSS ÷ messages in flight): ${rss
              .map(
                (p) =>
                  `c=${p.concurrency}: ${mb(p.perMessageBytes)} MB = ${(p.perMessageBytes / p.messageBytes).toFixed(2)}× the ${mb(p.messageBytes)} MB message (idle ${mb(p.idleBytes)} MB, peak ${mb(p.peakBytes)} MB, ${p.requests} req)`,
              )
              .join('; ')}.`,
      );
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
        '| path | rate/s | p50 ms | p90 | p95 | p99 | mean | done/s | p50 ×floor | p99 ×floor | client CPU ms/req | server CPU ms/req | server GC ms/req (Mark-Compact /1k) | n |',
      );
      lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
      for (const r of open) lines.push(rowLine(report, r, true));
    }
  }
  lines.push('', '#### Paths', '');
  for (const p of report.paths) lines.push(`- **${p.label}**: ${p.description}.`);
  lines.push(
    '',
    'CPU: client = this load-generator process (encode request, decode answer into tensors); server = the server process(es) from /proc. ' +
      'In-process runs in one process, so its CPU is all "server". p99 of a block with fewer than 100 requests is its maximum. ' +
      'Server GC: pauses and incremental marking steps of every isolate of the started servers (main thread and inference workers), ' +
      "from V8's --trace-gc, per request, with major collections (Mark-Compact) per 1000 requests in brackets; concurrent " +
      'marking and sweeping on V8 threads count only in server CPU. Memory-reducer collections (V8 shrinking the heap of an ' +
      'isolate it sees allocating slowly: the main thread after start-up; inference workers and JSON decode threads run ' +
      'without the reducer) are shown apart as "+ N reducer" (ms per request): they still cost the thread they run on.',
  );
}

/** Milliseconds for compact cells: one decimal below 10, whole numbers above. */
function compactMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  return ms < 10 ? ms.toFixed(1) : ms.toFixed(0);
}

function sweepCell(r: SweepRow | undefined): string {
  if (!r) return '—';
  if (r.skipped !== undefined || !r.latency) return 'failed';
  const errors = r.errors ? `, ${r.errors} errors` : '';
  return `${num(r.throughput, 0)} (${compactMs(r.latency.p50)}/${compactMs(r.latency.p99)}${errors})`;
}

function formatSweep(sweep: SweepReport, lines: string[]): void {
  const configs = [...new Set(sweep.rows.map((r) => r.config))];
  const cases = [...new Set(sweep.rows.map((r) => r.case))];
  const floors = sweep.floors
    .map((f) => `${CASES[f.case].short} ${formatMs(f.before.p50)}/${formatMs(f.after.p50)} ms`)
    .join(', ');
  lines.push(
    '',
    '### Throughput sweep',
    '',
    `Requests/s with (p50/p99 ms) for gRPC Predict of batch-1 requests (${sweep.encoding}), closed loop at concurrency c, ` +
      `${(sweep.durationMs / 1000).toFixed(1)} s per point after an untimed warm-up at the same concurrency; a fresh server per layout ` +
      `(flags: ${sweep.serverArgs.join(' ') || 'none'}). Raw onnxruntime floor (batch 1, intra-op ${sweep.floorIntraOpThreads}) p50 before/after: ${floors || '—'}.`,
    '',
    `| model | instances × intra-op threads | ${sweep.concurrencies.map((c) => `c=${c}`).join(' | ')} |`,
    `|---|---|${sweep.concurrencies.map(() => '---:').join('|')}|`,
  );
  for (const id of cases) {
    for (const name of configs) {
      const cells = sweep.concurrencies.map((c) =>
        sweepCell(sweep.rows.find((r) => r.case === id && r.config === name && r.concurrency === c)),
      );
      lines.push(
        `| ${CASES[id].short} | ${describeSweepConfig(parseSweepConfig(name))} | ${cells.join(' | ')} |`,
      );
    }
  }
  lines.push(
    '',
    '| model | layout | c | req/s | p50 ms | p90 | p99 | client CPU ms/req | server CPU ms/req | server GC ms/req (Mark-Compact /1k) | n | errors |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const r of sweep.rows) {
    if (r.skipped !== undefined && !r.latency) {
      lines.push(
        `| ${CASES[r.case].short} | ${r.config} | ${r.concurrency} | ${r.skipped.replaceAll('|', '/')} | | | | | | | | |`,
      );
      continue;
    }
    const l = r.latency!;
    lines.push(
      `| ${CASES[r.case].short} | ${r.config} | ${r.concurrency} | ${num(r.throughput)} | ${formatMs(l.p50)} | ${formatMs(l.p90)} | ${formatMs(l.p99)} | ${num(r.clientCpuMsPerRequest, 2)} | ${num(r.serverCpuMsPerRequest, 2)} | ${gcCell(r)} | ${l.n} | ${r.errors ?? 0}${r.firstError !== undefined ? ` (${r.firstError.replaceAll('|', '/')})` : ''} |`,
    );
  }
}

function formatColdStart(cold: ColdStartReport, lines: string[]): void {
  lines.push(
    '',
    '### First requests after a load',
    '',
    `gRPC Predict on a connection a GetModelStatus call already opened; steady p50 over the last two thirds of ${cold.requests} requests ` +
      `(server flags: ${cold.serverArgs.join(' ') || 'none'}). Server start = spawning \`visionserve serve\` to its ready line (every model loaded).`,
    '',
    '| model | warmup | server start to ready ms | 1st request | 2nd request | steady p50 |',
    '|---|---|---:|---:|---:|---:|',
  );
  for (const r of cold.rows) {
    const warm = r.warmup ? 'on (default)' : 'off';
    if (r.skipped !== undefined) {
      lines.push(
        `| ${CASES[r.case].short} | ${warm} | ${num(r.startMs, 0)} | ${r.skipped.replaceAll('|', '/')} | | |`,
      );
      continue;
    }
    lines.push(
      `| ${CASES[r.case].short} | ${warm} | ${num(r.startMs, 0)} | ${formatMs(r.firstMs)} | ${formatMs(r.secondMs)} | ${formatMs(r.steadyP50Ms)} |`,
    );
  }
}

function formatStream(stream: StreamReport, lines: string[]): void {
  lines.push(
    '',
    '### Frame streams (WebSocket)',
    '',
    `Capacity: \`/invocations\` of the case's image from two closed loops for ${formatDuration(stream.durationMs / 1000)}; ` +
      'streams with policy=all keep two frames outstanding each; latency is sent to answered, client side. ' +
      'latest: one stream sent frames at 2× the capacity.',
    '',
    '| model | load | frames/s | of capacity | p50 | p99 | notes |',
    '|---|---|---:|---:|---:|---:|---|',
  );
  for (const r of stream.rows) {
    const name = CASES[r.case].short;
    if (r.skipped !== undefined || r.capacityPerS === undefined) {
      lines.push(`| ${name} | skipped: ${(r.skipped ?? '').replaceAll('|', '/')} | | | | | |`);
      continue;
    }
    const inv = r.invocationsLatency!;
    lines.push(`| ${name} | /invocations, 2 loops (capacity) | ${num(r.capacityPerS)} | 1.00 | | | |`);
    lines.push(`| ${name} | /invocations, 1 loop | | | ${formatMs(inv.p50)} | ${formatMs(inv.p99)} | |`);
    for (const l of r.loads ?? []) {
      lines.push(
        `| ${name} | ${l.streams} stream(s), all | ${num(l.framesPerS)} | ${num(l.ofCapacity, 2)} | ${formatMs(l.latency.p50)} | ${formatMs(l.latency.p99)} | ${l.errors > 0 ? `${l.errors} frames answered with an error` : ''} |`,
      );
    }
    const x = r.latest2x!;
    lines.push(
      `| ${name} | 1 stream, latest at 2× | ${num(x.answered / (stream.durationMs / 1000))} answered | | ${formatMs(x.latency.p50)} | ${formatMs(x.latency.p99)} | ${x.dropped} of ${x.sent} dropped (${num((100 * x.dropped) / x.sent, 0)} %); server RSS ${num(r.rssBeforeMb, 0)} → ${num(r.rssAfterMb, 0)} MB |`,
    );
  }
}

/** Markdown: the run's settings, then the latency, sweep, cold-start and overload sections that ran. */
export function formatMarkdown(report: BenchReport): string {
  const m = report.meta;
  const lines: string[] = [];
  lines.push(`## visionserve benchmark (${m.date.slice(0, 19).replace('T', ' ')} UTC)`);
  lines.push('');
  lines.push(
    `${m.cpu}, ${m.cores} cores, Node ${m.node}; ${m.mode} server${m.serverArgs.length > 0 ? ` (${m.serverArgs.join(' ')})` : ''}. ` +
      `Suites: ${m.suites.join(', ')}. Whole run: ${formatDuration(m.durationS)} (estimated ${formatDuration(m.estimatedS)}).` +
      (m.malloc !== undefined ? ` Malloc (this process and every one it started): ${m.malloc}.` : '') +
      (m.nodeFlags !== undefined
        ? ` Load generator and floors (its worker threads): node ${m.nodeFlags.length > 0 ? m.nodeFlags.join(' ') : 'without flags'}; in-process path and servers without the flags for large answers.`
        : ''),
  );
  if (m.suites.includes('latency')) formatLatency(report, lines);
  if (report.sweep) formatSweep(report.sweep, lines);
  if (report.coldStart) formatColdStart(report.coldStart, lines);
  if (report.overload) formatOverload(report.overload, lines);
  if (report.stream) formatStream(report.stream, lines);
  return lines.join('\n') + '\n';
}

function rowLine(report: BenchReport, r: BenchRow, open: boolean): string {
  const label = pathLabel(report, r.path);
  if (r.skipped !== undefined) {
    const cols = open ? 13 : 14;
    return `| ${label} | skipped: ${r.skipped.replaceAll('|', '/')} ${'| '.repeat(cols)}|`;
  }
  const l = r.latency!;
  const errors = r.errors ? ` (${r.errors} errors)` : '';
  if (open) {
    return `| ${label} | ${num(r.ratePerSecond)} | ${p50Cell(r)} | ${formatMs(l.p90)} | ${formatMs(l.p95)} | ${formatMs(l.p99)} | ${formatMs(l.mean)} | ${num(r.throughput)} | ${ratio(r.ratioP50)} | ${ratio(r.ratioP99)} | ${num(r.clientCpuMsPerRequest, 2)} | ${num(r.serverCpuMsPerRequest, 2)} | ${gcCell(r)} | ${l.n}${errors} |`;
  }
  return `| ${label} | ${p50Cell(r)} | ${formatMs(l.p90)} | ${formatMs(l.p95)} | ${formatMs(l.p99)} | ${formatMs(l.mean)} | ${num(r.throughput)} | ${ratio(r.ratioP50)} | ${ratio(r.ratioP99)} | ${formatBytes(r.requestBytes)} | ${formatBytes(r.responseBytes)} | ${num(r.clientCpuMsPerRequest, 2)} | ${num(r.serverCpuMsPerRequest, 2)} | ${gcCell(r)} | ${l.n}${errors} |`;
}

/** `0.12 (3.4)`: GC ms per request and Mark-Compacts per 1000 requests; — where not measured. */
function gcCell(r: {
  serverGcMsPerRequest?: number;
  majorGcsPer1000?: number;
  serverReducerGcMsPerRequest?: number;
}): string {
  if (r.serverGcMsPerRequest === undefined) return '—';
  const reducer = r.serverReducerGcMsPerRequest ?? 0;
  return (
    `${num(r.serverGcMsPerRequest, 2)} (${num(r.majorGcsPer1000 ?? NaN, 1)})` +
    (reducer >= 0.005 ? ` + ${num(reducer, 2)} reducer` : '')
  );
}
