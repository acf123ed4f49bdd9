/**
 * The benchmark chart as a hand-written SVG (no dependencies): per case, grouped bars of
 * p50 and p99 latency as a multiple of the raw onnxruntime floor, on a log scale, with
 * the absolute p50 under each group.
 */
import type { BenchReport, BenchRow } from './bench-results.js';
import { formatMs, pathLabel } from './bench-report.js';

/** Narrowest chart, px; wider when a panel has more bar groups than fit at GROUP_MIN_WIDTH. */
const WIDTH = 1000;
/** Narrowest bar group, px: room for its label's lines of about 12 bold characters. */
const GROUP_MIN_WIDTH = 100;
/** Lines a bar group's label may take. */
const LABEL_LINES = 4;
const PANEL_HEIGHT = 392;
const TOP = 84;
const LEFT = 70;
const RIGHT = 20;
const PLOT_HEIGHT = 220;
const P50 = '#1f5fa8';
const P99 = '#8fb8e3';

function esc(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

function ticksUpTo(max: number): number[] {
  const ticks: number[] = [];
  for (let decade = 1; decade <= max * 1.0001; decade *= 10) {
    for (const m of [1, 2, 5]) if (decade * m <= max * 1.0001) ticks.push(decade * m);
  }
  return ticks;
}

function ratioLabel(r: number): string {
  return r < 10 ? `${r.toFixed(1)}×` : `${Math.round(r)}×`;
}

/** Wraps a label into at most LABEL_LINES lines of ~maxChars (the last one takes the rest). */
function wrap(text: string, maxChars: number): string[] {
  const words = text.split(' ');
  const lines: string[] = [''];
  for (const w of words) {
    const cur = lines[lines.length - 1]!;
    if (cur.length > 0 && cur.length + 1 + w.length > maxChars && lines.length < LABEL_LINES) lines.push(w);
    else lines[lines.length - 1] = cur.length > 0 ? `${cur} ${w}` : w;
  }
  return lines;
}

export function formatChart(report: BenchReport): string {
  const cases = report.cases;
  const height = TOP + cases.length * PANEL_HEIGHT + 40;
  const groups = Math.max(
    0,
    ...cases.map((c) => report.rows.filter((r) => r.case === c.id && r.mode === 'closed').length),
  );
  const width = Math.max(WIDTH, LEFT + RIGHT + groups * GROUP_MIN_WIDTH);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(
    `<text x="${LEFT}" y="28" font-size="18" font-weight="bold">Latency as a multiple of the raw onnxruntime floor (lower is better)</text>`,
  );
  out.push(
    `<text x="${LEFT}" y="50" fill="#444">Closed loop, concurrency ${report.meta.options.concurrency}. Each bar: the path's percentile ÷ the same percentile of the raw onnxruntime run, measured in the same run.</text>`,
  );
  // Legend.
  out.push(
    `<rect x="${LEFT}" y="60" width="14" height="14" fill="${P50}"/><text x="${LEFT + 20}" y="72">p50 ÷ floor p50</text>`,
  );
  out.push(
    `<rect x="${LEFT + 150}" y="60" width="14" height="14" fill="${P99}"/><text x="${LEFT + 170}" y="72">p99 ÷ floor p99</text>`,
  );

  cases.forEach((c, ci) => {
    const y0 = TOP + ci * PANEL_HEIGHT;
    const rows = report.rows.filter((r) => r.case === c.id && r.mode === 'closed');
    const measured = rows.filter((r) => r.skipped === undefined);
    const maxRatio = Math.max(2, ...measured.flatMap((r) => [r.ratioP50 ?? 1, r.ratioP99 ?? 1]));
    const top = 10 ** Math.ceil(Math.log10(maxRatio * 1.15));
    const plotTop = y0 + 58;
    const plotBottom = plotTop + PLOT_HEIGHT;
    const yOf = (r: number): number =>
      plotBottom - (Math.log10(Math.max(1, r)) / Math.log10(top)) * PLOT_HEIGHT;
    out.push(`<text x="${LEFT}" y="${y0 + 22}" font-size="15" font-weight="bold">${esc(c.title)}</text>`);
    out.push(
      `<text x="${LEFT}" y="${y0 + 40}" fill="#444">${esc(c.request)} · floor p50 ${formatMs(c.floorP50)} ms, p99 ${formatMs(c.floorP99)} ms</text>`,
    );
    for (const t of ticksUpTo(top)) {
      const y = yOf(t);
      out.push(
        `<line x1="${LEFT}" x2="${width - RIGHT}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="${t === 1 ? '#888' : '#e3e3e3'}" stroke-width="1"/>`,
      );
      out.push(`<text x="${LEFT - 8}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#555">${t}×</text>`);
    }
    const groupWidth = (width - LEFT - RIGHT) / Math.max(1, rows.length);
    const barWidth = Math.min(34, groupWidth / 3.2);
    rows.forEach((r: BenchRow, i) => {
      const cx = LEFT + groupWidth * (i + 0.5);
      const label = wrap(pathLabel(report, r.path), Math.max(12, Math.floor(groupWidth / 8)));
      label.forEach((line, li) => {
        out.push(
          `<text x="${cx.toFixed(1)}" y="${plotBottom + 18 + li * 14}" text-anchor="middle" font-weight="bold">${esc(line)}</text>`,
        );
      });
      const infoY = plotBottom + 18 + label.length * 14;
      if (r.skipped !== undefined || r.latency === undefined) {
        out.push(
          `<rect x="${(cx - barWidth).toFixed(1)}" y="${(plotBottom - 60).toFixed(1)}" width="${(2 * barWidth).toFixed(1)}" height="60" fill="none" stroke="#aaa" stroke-dasharray="4 3"/>`,
        );
        out.push(
          `<text x="${cx.toFixed(1)}" y="${plotBottom - 26}" text-anchor="middle" fill="#888">n/a</text>`,
        );
        const reason = (r.skipped ?? '').includes('listener')
          ? 'no listener on this server'
          : (r.skipped ?? '').includes('top-k')
            ? 'not applicable'
            : 'skipped';
        out.push(
          `<text x="${cx.toFixed(1)}" y="${infoY}" text-anchor="middle" fill="#888">${esc(reason)}</text>`,
        );
        return;
      }
      const bars: [number, string][] = [
        [r.ratioP50 ?? 1, P50],
        [r.ratioP99 ?? 1, P99],
      ];
      bars.forEach(([value, color], bi) => {
        const x = cx - barWidth + bi * barWidth;
        const y = yOf(value);
        out.push(
          `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${Math.max(1, plotBottom - y).toFixed(1)}" fill="${color}"/>`,
        );
        out.push(
          `<text x="${(x + (barWidth - 2) / 2).toFixed(1)}" y="${(y - 4).toFixed(1)}" text-anchor="middle" font-size="11">${ratioLabel(value)}</text>`,
        );
      });
      out.push(
        `<text x="${cx.toFixed(1)}" y="${infoY}" text-anchor="middle" fill="#333">p50 ${formatMs(r.latency.p50)} ms</text>`,
      );
      out.push(
        `<text x="${cx.toFixed(1)}" y="${infoY + 14}" text-anchor="middle" fill="#333">p99 ${formatMs(r.latency.p99)} ms</text>`,
      );
    });
    out.push(`<line x1="${LEFT}" x2="${LEFT}" y1="${plotTop}" y2="${plotBottom}" stroke="#888"/>`);
  });
  out.push(
    `<text x="${LEFT}" y="${height - 14}" fill="#666">visionserve bench · ${esc(report.meta.cpu)}, ${report.meta.cores} cores, Node ${esc(report.meta.node)} · ${report.meta.date.slice(0, 16).replace('T', ' ')} UTC · log scale, bars start at 1×</text>`,
  );
  out.push('</svg>');
  return out.join('\n') + '\n';
}
