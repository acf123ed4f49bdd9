import { setFlagsFromString } from 'node:v8';
import type { Worker } from 'node:worker_threads';

/** Workers started and not yet online: V8's memory reducer stays off while there are any. */
let starting = 0;

/** The process was started with the memory reducer off: leave the flag alone. */
const offForProcess = process.execArgv.includes('--no-memory-reducer');

/**
 * Starts a worker thread whose V8 heap has no memory reducer. The reducer runs full
 * Mark-Compacts ("Mark-Compact (reduce)" in --trace-gc) in a heap it sees allocating slowly,
 * to give memory back. An inference worker's heap is a few MB and allocates little per run, so
 * under steady load the reducer ran about one every 8 s (2.5-30 ms, plus incremental marking
 * steps of up to 32 ms) on the worker thread, i.e. inside a request's latency: 2-3 of every
 * ~450 requests at c=1, at their p97-p99.5. Without it the heap is collected as it fills
 * (scavenges).
 *
 * V8 reads the flag when an isolate is created, and flags are process-wide: it is off from
 * `start` until the worker is online (or gone), so the main thread keeps its reducer (and any
 * other worker that happens to start in that window goes without).
 */
export function startWithoutMemoryReducer(
  start: () => Worker,
  /** Sets a V8 flag (tests observe it). Default node:v8's setFlagsFromString. */
  setFlag: (flag: string) => void = setFlagsFromString,
): Worker {
  if (starting++ === 0 && !offForProcess) setFlag('--no-memory-reducer');
  let done = false;
  const restore = (): void => {
    if (done) return;
    done = true;
    if (--starting === 0 && !offForProcess) setFlag('--memory-reducer');
  };
  let worker: Worker;
  try {
    worker = start();
  } catch (error) {
    restore();
    throw error;
  }
  worker.once('online', restore);
  worker.once('exit', restore);
  return worker;
}
