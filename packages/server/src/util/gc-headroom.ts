import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';

export interface GcHeadroomOptions {
  /**
   * How far the old generation may grow past the heap that survived the last full
   * collection before the next one starts, in MiB. Applied while it exceeds what V8 allows
   * by itself (heaps smaller than this, where V8's minimum growth is about the size of its
   * young generation); larger heaps keep V8's own policy. 0 turns it off. Default 64.
   */
  readonly headroomMb?: number | undefined;
}

/**
 * Largest growth V8 is told to allow, in percent of the surviving heap: the whole headroom
 * above heaps down to about 3 MiB. Capped at 300 % (V8's own largest factor, 4), the bundled
 * server's 9 MiB main heap got a limit of 36-40 MiB, and V8 still started incremental marking
 * at 9-12 MiB used (--trace-incremental-marking: "Start (task)", "Start (allocation limit)")
 * every ~40 gRPC requests of 600 KB at c=1: full GCs with pauses of 2.5-14 ms plus marking
 * steps up to 11 ms on the event loop. With the whole 64 MiB above it, none in steady state (the
 * unbundled modules' 11 MiB heap had just cleared the threshold at 300 %).
 */
const MAX_GROWING_PERCENT = 2000;

let holders = 0;
let observer: PerformanceObserver | undefined;
let applied = 0;
let headroomBytes = 0;

function apply(percent: number): void {
  if (percent === applied) return;
  applied = percent;
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}

/** The growth to ask for after a full collection that left `usedBytes` (0: V8's own policy). */
export function growingPercentFor(usedBytes: number, headroom: number): number {
  if (headroom <= 0 || usedBytes <= 0 || usedBytes >= headroom) return 0;
  return Math.min(MAX_GROWING_PERCENT, Math.ceil((100 * headroom) / usedBytes));
}

function update(): void {
  apply(growingPercentFor(getHeapStatistics().used_heap_size, headroomBytes));
}

/**
 * Keeps full garbage collections (Mark-Compact) of a small heap rare under steady load.
 * V8 starts one whenever the old generation's room left before its limit drops to the size
 * of the young generation (16 MiB once it has grown); after each one it sets the limit about
 * that far above a small heap's surviving size, so a server whose requests only make
 * short-lived garbage ran a full collection (a few ms of pause plus tens of ms of marking on
 * the main and helper threads) every 10-20 requests. This sets V8's heap growing factor
 * (`--heap-growing-percent`, read at every full collection, process-wide: it also applies to
 * worker threads' heaps) after each full collection so that the limit sits `headroomMb` above
 * the surviving heap; heaps larger than that keep V8's own factor. Memory cost: up to
 * `headroomMb` more old-generation garbage before it is collected.
 *
 * Returns a function that undoes it (once every caller has, when several servers share the process).
 */
export function keepGcHeadroom(options: GcHeadroomOptions = {}): () => void {
  const headroom = Math.max(0, options.headroomMb ?? 64) * 1024 * 1024;
  if (headroom === 0) return () => undefined;
  holders++;
  headroomBytes = Math.max(headroomBytes, headroom);
  if (observer === undefined) {
    observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const { detail } = entry as { detail?: { kind?: number } };
        if (detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) {
          update();
          return;
        }
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    update();
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    holders--;
    if (holders > 0) return;
    observer?.disconnect();
    observer = undefined;
    headroomBytes = 0;
    apply(0);
  };
}
