/**
 * Garbage collection in a benchmarked server, from V8's `--trace-gc` lines on its stdout:
 * every isolate of the process (the main thread and the inference workers) is counted.
 * Pauses and incremental marking steps are thread time the collector took from JavaScript;
 * V8's concurrent marking and sweeping on its own threads show up only in the server's CPU.
 * Memory-reducer collections (`Mark-Compact (reduce)`: V8 shrinking the heap of an isolate it
 * sees allocating slowly, e.g. the main thread some seconds after start-up; inference workers
 * start without the reducer) are not caused by the requests' garbage: they are counted apart.
 * (A reduce-memory collection forced by external memory pressure is counted as the requests'.)
 */

/** Cumulative GC figures of one server process. */
export interface GcTotals {
  /** Pause time plus incremental marking steps, every isolate, memory-reducer collections excluded, ms. */
  readonly ms: number;
  /** Major collections (Mark-Compact) so far, every isolate, memory-reducer collections excluded. */
  readonly majors: number;
  /** Minor collections (Scavenge, Minor Mark-Compact) so far. */
  readonly minors: number;
  /** Memory-reducer major collections so far, every isolate. */
  readonly reducers: number;
  /** Their pause time plus incremental marking steps, ms. */
  readonly reducerMs: number;
}

export const NO_GC: GcTotals = { ms: 0, majors: 0, minors: 0, reducers: 0, reducerMs: 0 };

// [pid:isolate]   1234 ms: Mark-Compact 10.1 (13.5) -> 8.0 (12.9) MB, 1.23 / 0.00 ms  (+ 41.4 ms in 58 steps ...
const TRACE =
  /^\[\d+:0x[0-9a-f]+\]\s+\d+ ms: ([A-Za-z -]+?)( \(reduce\))? [\d.]+ \([\d.]+\) -> [\d.]+ \([\d.]+\) MB, ([\d.]+) \/ [\d.]+ ms(?:\s+\(\+ ([\d.]+) ms in)?/;

/** The figures of one `--trace-gc` line; undefined for any other line. */
export function parseGcLine(line: string): GcTotals | undefined {
  const m = TRACE.exec(line);
  if (!m) return undefined;
  const kind = m[1]!;
  const ms = Number(m[3]) + (m[4] !== undefined ? Number(m[4]) : 0);
  const major = kind === 'Mark-Compact' || kind === 'Mark-sweep';
  // V8 also marks as (reduce) the collections that external memory over its hard limit forces:
  // those are the requests' garbage.
  if (major && m[2] !== undefined && !line.includes('external memory pressure'))
    return { ...NO_GC, reducers: 1, reducerMs: ms };
  return { ...NO_GC, ms, majors: major ? 1 : 0, minors: major ? 0 : 1 };
}

/** Accumulates `--trace-gc` output fed in arbitrary chunks. */
export function createGcTrace(): { feed(chunk: string): void; totals(): GcTotals } {
  let partial = '';
  let totals = NO_GC;
  return {
    feed(chunk) {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        const g = parseGcLine(line);
        if (g !== undefined) totals = plus(totals, g, 1);
      }
    },
    totals: () => totals,
  };
}

/** What happened between two readings. */
export function gcBetween(before: GcTotals | undefined, after: GcTotals | undefined): GcTotals | undefined {
  if (before === undefined || after === undefined) return undefined;
  return plus(after, before, -1);
}

function plus(a: GcTotals, b: GcTotals, sign: 1 | -1): GcTotals {
  return {
    ms: a.ms + sign * b.ms,
    majors: a.majors + sign * b.majors,
    minors: a.minors + sign * b.minors,
    reducers: a.reducers + sign * b.reducers,
    reducerMs: a.reducerMs + sign * b.reducerMs,
  };
}
