/** The overload suite's section of results.md: the summary table, the targets, then the details. */
import { CASES } from './bench-cases.js';
import type { OverloadReport, OverloadRun } from './bench-results.js';

const n1 = (v: number | undefined, digits = 1): string =>
  v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits);

/** ms: one decimal below 100, whole above. */
const ms = (v: number | undefined): string =>
  v === undefined || !Number.isFinite(v) ? '—' : v < 100 ? v.toFixed(1) : v.toFixed(0);

const protocolName = (r: OverloadRun): string =>
  r.protocol === 'grpc' ? 'gRPC' : r.expectContinue === true ? 'REST (Expect: 100-continue)' : 'REST';
const runName = (r: OverloadRun): string => `${CASES[r.case].short} ${protocolName(r)}`;
const cell = (text: string): string => text.replaceAll('|', '/');

export function formatOverload(o: OverloadReport, lines: string[]): void {
  const pin =
    o.serverCpus !== undefined || o.clientCpus !== undefined
      ? ` Pinned: server on CPU ${o.serverCpus ?? 'any'}, load generator on CPU ${o.clientCpus ?? 'any'} (taskset).`
      : ' Not pinned: server and load generator share the cores.';
  lines.push(
    '',
    '### Overload',
    '',
    `Capacity: closed loops of ${o.capacityDurationMs / 1000} s at concurrency ${o.capacityConcurrencies.join(', ')} until two bring no gain; ` +
      `"at capacity" is the smallest concurrency within 5 % of the best throughput. Then an open loop at ${o.factor}× capacity ` +
      `(${o.arrivals} arrivals) for ${o.durationMs / 1000} s, ${o.timeoutMs} ms timeout per request; accepted latency counts from ` +
      `the scheduled send time, time to refusal from the actual send. RSS: /proc VmRSS of the server; idle = median of the ` +
      `last ${Math.min(2, o.settleMs / 1000)} s of a ${o.settleMs / 1000} s pause before the open loop (after the capacity search), after = ${o.afterMs / 1000} s after the last answer.${pin}`,
    '',
    '| run | capacity req/s (c) | p50 / p99 at capacity ms | offered req/s | goodput req/s (% cap) | accepted p50 / p99 ms (× cap p99) | shed | refusal p99 / max ms | other | RSS idle / peak / after MiB | load avg before → after |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const r of o.runs) {
    if (r.skipped !== undefined || !r.capacity || !r.open || !r.rss) {
      lines.push(`| ${runName(r)} | skipped: ${cell(r.skipped ?? 'incomplete')} | | | | | | | | | |`);
      continue;
    }
    const { capacity: c, open: p, rss } = r;
    const other = p.sent - (p.counts.ok ?? 0) - (p.counts.shed ?? 0);
    lines.push(
      `| ${runName(r)} | ${n1(c.throughput)} (${c.concurrency}) | ${ms(c.p50)} / ${ms(c.p99)} | ${n1(p.ratePerSecond)} | ` +
        `${n1(p.goodput)} (${n1(p.goodputRatio * 100, 0)} %) | ${ms(p.accepted.p50)} / ${ms(p.accepted.p99)} (${n1(p.acceptedP99Ratio, 2)}×) | ` +
        `${p.counts.shed ?? 0} of ${p.sent} | ${ms(p.rejection.p99)} / ${ms(p.rejection.max)} | ${other} | ` +
        `${n1(rss.idleMiB, 0)} / ${n1(rss.peakMiB, 0)} / ${n1(rss.afterMiB, 0)} | ` +
        `${r.loadAverageBefore[0]?.toFixed(1) ?? '—'} → ${r.loadAverageAfter?.[0]?.toFixed(1) ?? '—'} |`,
    );
  }
  const measured = o.runs.filter((r) => r.targets && r.targets.length > 0);
  if (measured.length > 0) {
    lines.push(
      '',
      `| target | ${measured.map(runName).join(' | ')} |`,
      `|---|${measured.map(() => '---').join('|')}|`,
    );
    for (const t of measured[0]!.targets!) {
      const cells = measured.map((r) => {
        const x = r.targets!.find((y) => y.id === t.id);
        return x ? `**${x.pass ? 'PASS' : 'FAIL'}** ${cell(x.measured)}` : '—';
      });
      lines.push(`| ${cell(t.target)} | ${cells.join(' | ')} |`);
    }
  }
  lines.push(
    '',
    '| run | capacity points: c → req/s (p50/p99 ms, errors) | server CPU ms per OK request at capacity | answers | send lag p99 / max ms | generator loop delay p99 / max ms | client / server CPU ms per request | server CPU ms per refusal (est.) | peak outstanding | connections | server flags |',
    '|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const r of o.runs) {
    if (!r.capacity || !r.open) continue;
    const points = r.capacity.points
      .map(
        (p) =>
          `${p.concurrency} → ${n1(p.throughput)} (${ms(p.latency.p50)}/${ms(p.latency.p99)}${p.errors > 0 ? `, ${p.errors}` : ''})`,
      )
      .join('; ');
    const answers = Object.entries(r.open.labels)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    const p = r.open;
    const at = r.capacity.points.find((x) => x.concurrency === r.capacity!.concurrency);
    lines.push(
      `| ${runName(r)} | ${points} | ${n1(at?.serverCpuMsPerRequest, 2)} | ${cell(answers)} | ${ms(p.sendLag.p99)} / ${ms(p.sendLag.max)} | ` +
        `${ms(p.generatorLoopDelayP99Ms)} / ${ms(p.generatorLoopDelayMaxMs)} | ${n1(p.clientCpuMsPerRequest, 2)} / ${n1(p.serverCpuMsPerRequest, 2)} | ` +
        `${n1(p.serverCpuMsPerRefusal, 2)} | ` +
        `${p.peakOutstanding} | ${p.connections} | ${cell(r.serverArgs.join(' ') || 'defaults')} |`,
    );
  }
  const said = o.runs.filter((r) => r.open && Object.keys(r.open.messages).length > 0);
  if (said.length > 0) {
    lines.push('', 'What refusals and errors said (numbers as #):', '');
    for (const r of said)
      for (const [m, count] of Object.entries(r.open!.messages).sort((a, b) => b[1] - a[1]))
        lines.push(`- ${runName(r)}: ${count} × ${m.replaceAll('\n', ' ')}`);
  }
  formatWindows(o, lines);
  const timelines = o.runs.filter((r) => r.rss);
  if (timelines.length > 0) {
    lines.push('', 'RSS timeline (s since the open loop started: highest MiB in that second):', '');
    for (const r of timelines)
      lines.push(`- ${runName(r)}: ${r.rss!.timeline.map(([s, m]) => `${s}: ${m}`).join(', ')}`);
  }
}

/** The open loop window by window (a soak's drift shows here). */
function formatWindows(o: OverloadReport, lines: string[]): void {
  const runs = o.runs.filter((r) => r.windows && r.windows.length > 0);
  if (runs.length === 0) return;
  lines.push(
    '',
    'The open loop in windows of scheduled time (accepted latency from the scheduled send; RSS: median in the window):',
    '',
    '| run | window s | sent | OK | not OK | accepted p50 / p99 ms | RSS MiB |',
    '|---|---|---:|---:|---:|---:|---:|',
  );
  for (const r of runs)
    for (const w of r.windows!)
      lines.push(
        `| ${runName(r)} | ${n1(w.fromS, 0)}–${n1(w.toS, 0)} | ${w.sent} | ${w.ok} | ${w.failed} | ${ms(w.p50)} / ${ms(w.p99)} | ${n1(w.rssMiB, 0)} |`,
      );
}
