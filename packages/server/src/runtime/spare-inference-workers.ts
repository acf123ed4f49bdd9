/**
 * Inference worker threads started before any model is known: each boots Node and loads
 * onnxruntime (a third of a worker's start-up) while the process loads the rest of the
 * server, then waits. A model load takes one and sends it the model (onnx-worker.ts, `load`)
 * instead of starting a thread of its own. Idle spares hold no model and no onnxruntime
 * session, and never keep the process alive.
 */
import { Worker } from 'node:worker_threads';
import { startWithoutMemoryReducer } from './worker-memory-reducer.js';

export interface SpareInferenceWorkersOptions {
  /** Threads to start now (e.g. `--model_instances`: the first version's instances). Default 0. */
  readonly count?: number;
}

export interface SpareInferenceWorkers {
  /**
   * Hands over an idle spare that is still alive (it then keeps the process alive like any
   * worker), or undefined when none is left. The taker sends it `{ type: 'load' }`.
   */
  take(): Worker | undefined;
  /** Spares not taken yet. */
  readonly idle: number;
  /**
   * Starts `count` more spares (e.g. once the model config file told how many threads the
   * initial loads take). Ignored after `close`.
   */
  add(count: number): void;
  /** Asks every spare not taken to exit; resolves once they have. Idempotent: every call resolves then. */
  close(): Promise<void>;
}

const WORKER_URL = new URL('./onnx-worker.js', import.meta.url);

/** Starts `count` spare inference workers; see the module comment. */
export function startSpareInferenceWorkers(
  options: SpareInferenceWorkersOptions = {},
): SpareInferenceWorkers {
  const idle = new Set<Worker>();
  const exited = new Map<Worker, Promise<void>>();
  let closed = false;
  let closing: Promise<void> | undefined;
  const startOne = (): void => {
    const worker = startWithoutMemoryReducer(() => new Worker(WORKER_URL));
    worker.unref();
    idle.add(worker);
    exited.set(
      worker,
      new Promise<void>((resolve) => {
        worker.once('exit', () => {
          idle.delete(worker);
          resolve();
        });
      }),
    );
    // A spare that fails to boot is dropped (its exit follows); a load then starts its own thread.
    worker.once('error', () => {
      idle.delete(worker);
    });
  };
  const start = (count: number): void => {
    for (let i = 0; i < count; i++) startOne();
  };
  start(Math.max(0, options.count ?? 0));
  return {
    take() {
      const worker = idle.values().next().value;
      if (worker === undefined) return undefined;
      idle.delete(worker);
      worker.ref();
      return worker;
    },
    get idle() {
      return idle.size;
    },
    add(count) {
      if (!closed) start(Math.max(0, count));
    },
    close() {
      // Every call waits for the same exits: a caller that exits the process right after
      // (a start-up error) must not tear it down while a spare is still loading onnxruntime,
      // which aborts the process (SIGABRT from the addon).
      closing ??= (async () => {
        closed = true;
        const waiting: Promise<void>[] = [];
        for (const worker of idle) {
          // onnx-worker's `close` (ToWorker in wire-tensor.ts, not imported: this module stays light).
          worker.postMessage({ type: 'close' });
          // Held until it has exited: an unref'd thread would not keep the wait alive.
          worker.ref();
          waiting.push(exited.get(worker)!);
        }
        idle.clear();
        await Promise.all(waiting);
      })();
      return closing;
    },
  };
}
