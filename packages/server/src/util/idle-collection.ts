import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Gives the main heap's load-time garbage back once the server goes quiet. Under load the
 * old generation may hold up to `--gc_headroom_mb` of garbage before a full collection
 * (util/gc-headroom.ts) and the young generation grows to its largest size; V8's own memory
 * reducer gave them back only 15-30 s after a load ended (measured, MobileNetV2 over gRPC:
 * RSS 299 MiB at the end of a 30 s burst, the same 15 s later). This watches the heap every
 * `checkMs`: when it has allocated less than `QUIET_BYTES` per check for `quietMs`, and it uses
 * `SLACK_BYTES` more than the last full collection left or has committed that much more than
 * after our last collection, it runs one full collection (5-15 ms for the server's ~10 MiB
 * live heap). After 5 s of low allocation V8 also shrinks the young generation in that
 * collection (its allocation-throughput window), hence the default of 6 s: RSS 299 → 260 MiB
 * 10 s after the same burst, against 243 before it. A busy server allocates far more than `QUIET_BYTES` per check; a
 * heap that shrank between two checks (a scavenge, or sweeping after a burst) counts as quiet, so
 * a run of such checks under load could still bring a collection: known, not measured to happen.
 */
export interface IdleCollectionOptions {
  /** Quiet time before the collection, ms (`--idle_gc_after_ms`); 0 turns it off. */
  readonly quietMs: number;
  /** How often the heap is looked at, ms. Default 500. */
  readonly checkMs?: number;
  /** Runs a full collection. Default: V8's `gc` exposed for this purpose. */
  readonly collect?: () => void;
  /** The heap's used and committed bytes. Default: node:v8 getHeapStatistics. */
  readonly heap?: () => { readonly used: number; readonly total: number };
  /**
   * Gives free malloc memory back (util/malloc-trim.ts), once per quiet time, at a quiet check
   * without a collection: what a burst freed outside V8's heap. Default none.
   */
  readonly trim?: (() => void) | undefined;
  /** Work in flight (requests): no trim meanwhile, the JS heap may be quiet under binary traffic. Default never. */
  readonly busy?: (() => boolean) | undefined;
}

/** Allocated between two checks below this, the heap counts as quiet. */
export const QUIET_BYTES = 1024 * 1024;
/** Used or committed this far above the last full collection's survivors: worth collecting. */
export const SLACK_BYTES = 16 * 1024 * 1024;

const v8Heap = (): { used: number; total: number } => {
  const s = getHeapStatistics();
  return { used: s.used_heap_size, total: s.total_heap_size };
};

let exposedGc: (() => void) | undefined;

/** A full collection by V8's `gc()` (the flag is process-wide, read when a context is created). */
export function collectFully(): void {
  if (exposedGc === undefined) {
    setFlagsFromString('--expose-gc');
    exposedGc = runInNewContext('gc') as () => void;
  }
  exposedGc();
}

/** The state one check looks at, kept between checks (exported for the unit test). */
export interface IdleState {
  lastUsed: number;
  quietSinceMs: number | undefined;
  /** Used bytes right after the last full collection (any: V8's, or ours). */
  survivors: number;
  /** Committed bytes after our last collection (at the start: then). */
  committed: number;
  /** The trim of this quiet time is done (reset when the heap allocates again). */
  trimmed: boolean;
}

/** What one check does. */
export interface CheckDecision {
  readonly collect: boolean;
  readonly trim: boolean;
}

const NOTHING: CheckDecision = { collect: false, trim: false };

/**
 * One check, updating `state`. Once the heap has been quiet for `quietMs`: collect when it holds
 * `SLACK_BYTES` to give back; trim once per quiet time at a quiet check without a collection (so
 * a trim after a collection comes a check later, when V8's sweeper has freed the buffers the
 * collection found), and not while `busy`.
 */
export function decideCheck(
  state: IdleState,
  heap: { readonly used: number; readonly total: number },
  nowMs: number,
  quietMs: number,
  busy: boolean,
): CheckDecision {
  const allocated = heap.used - state.lastUsed;
  state.lastUsed = heap.used;
  if (allocated >= QUIET_BYTES) {
    state.quietSinceMs = undefined;
    state.trimmed = false;
    return NOTHING;
  }
  state.quietSinceMs ??= nowMs;
  if (nowMs - state.quietSinceMs < quietMs) return NOTHING;
  const collect = heap.used - state.survivors >= SLACK_BYTES || heap.total - state.committed >= SLACK_BYTES;
  return { collect, trim: !collect && !state.trimmed && !busy };
}

/** Starts the watch; returns a function that stops it. */
export function startIdleCollection(options: IdleCollectionOptions): () => void {
  if (options.quietMs <= 0) return () => undefined;
  const heap = options.heap ?? v8Heap;
  const collect = options.collect ?? collectFully;
  const start = heap();
  const state: IdleState = {
    lastUsed: start.used,
    quietSinceMs: undefined,
    survivors: start.used,
    committed: start.total,
    trimmed: false, // loading models frees much: the first quiet time trims too
  };
  const observer = new PerformanceObserver((list) => {
    const major = list
      .getEntries()
      .some(
        (e) => (e as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR,
      );
    if (major) state.survivors = heap().used;
  });
  observer.observe({ entryTypes: ['gc'] });
  const timer = setInterval(() => {
    const decision = decideCheck(
      state,
      heap(),
      performance.now(),
      options.quietMs,
      options.busy?.() ?? false,
    );
    if (decision.collect) {
      try {
        collect();
      } catch {
        stop(); // no way to collect here (a V8 without the gc extension): leave it to V8
        return;
      }
      const after = heap();
      state.survivors = after.used;
      state.committed = after.total;
      state.lastUsed = after.used;
    }
    if (decision.trim) {
      state.trimmed = true;
      options.trim?.();
    }
  }, options.checkMs ?? 500);
  timer.unref();
  function stop(): void {
    clearInterval(timer);
    observer.disconnect();
  }
  return stop;
}
