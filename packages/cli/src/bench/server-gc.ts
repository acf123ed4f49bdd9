/**
 * Garbage collection in a benchmarked server, from V8's `--trace-gc` lines on its stdout:
 * every isolate of the process (the main thread and the inference workers) is counted.
 * Pauses and incremental marking steps are thread time the collector took from JavaScript;
 * V8's concurrent marking and sweeping on its own threads show up only in the server's CPU.
 */

/** Cumulative GC figures of one server process. */
export interface GcTotals {
  /** Pause time plus incremental marking steps, every isolate, ms. */
  readonly ms: number;
  /** Major collections (Mark-Compact) so far, every isolate. */
  readonly majors: number;
  /** Minor collections (Scavenge, Minor Mark-Compact) so far. */
  readonly minors: number;
}

export const NO_GC: GcTotals = { ms: 0, majors: 0, minors: 0 };

// [pid:isolate]   1234 ms: Mark-Compact 10.1 (13.5) -> 8.0 (12.9) MB, 1.23 / 0.00 ms  (+ 41.4 ms in 58 steps ...
const TRACE =
  /^\[\d+:0x[0-9a-f]+\]\s+\d+ ms: ([A-Za-z -]+?)(?: \(reduce\))? [\d.]+ \([\d.]+\) -> [\d.]+ \([\d.]+\) MB, ([\d.]+) \/ [\d.]+ ms(?:\s+\(\+ ([\d.]+) ms in)?/;

/** The figures of one `--trace-gc` line; undefined for any other line. */
export function parseGcLine(line: string): GcTotals | undefined {
  const m = TRACE.exec(line);
  if (!m) return undefined;
  const kind = m[1]!;
  const ms = Number(m[2]) + (m[3] !== undefined ? Number(m[3]) : 0);
  const major = kind === 'Mark-Compact' || kind === 'Mark-sweep';
  return { ms, majors: major ? 1 : 0, minors: major ? 0 : 1 };
}

/** Accumulates `--trace-gc` output fed in arbitrary chunks. */
export function createGcTrace(): { feed(chunk: string): void; totals(): GcTotals } {
  let partial = '';
  let ms = 0;
  let majors = 0;
  let minors = 0;
  return {
    feed(chunk) {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        const g = parseGcLine(line);
        if (g === undefined) continue;
        ms += g.ms;
        majors += g.majors;
        minors += g.minors;
      }
    },
    totals: () => ({ ms, majors, minors }),
  };
}

/** What happened between two readings. */
export function gcBetween(before: GcTotals | undefined, after: GcTotals | undefined): GcTotals | undefined {
  if (before === undefined || after === undefined) return undefined;
  return {
    ms: after.ms - before.ms,
    majors: after.majors - before.majors,
    minors: after.minors - before.minors,
  };
}
