import type { Worker } from 'node:worker_threads';

/**
 * Keeps a worker thread from being torn down inside a native onnxruntime call.
 *
 * onnxruntime-node runs `InferenceSession.create`, `run` and `release` synchronously on the
 * worker's JS thread. `Worker.terminate()` (or anything else that stops the thread: an
 * out-of-memory exit, the pool stopping it) only flags the isolate while the native code runs;
 * when `run` then builds its output tensors through N-API, every call fails, the failure is
 * thrown as a C++ `Napi::Error` out of the N-API callback, and the process ends with SIGABRT
 * (`terminate called after throwing an instance of 'Napi::Error'`; 4 of 4 trials on 5c6c578,
 * a MobileNetV2 batch of 32 terminated a third of the way into its run).
 *
 * The worker and the main thread share one Int32 word. The worker moves it IDLE → NATIVE
 * before a native call and back after; a stop asked for while it is NATIVE turns it into
 * STOP_AFTER_NATIVE, and the worker exits (process.exit, which ends only the thread) as soon as
 * the call returns, before it posts anything. A stop while IDLE turns it into STOPPING (the
 * worker will not enter a native call again) and terminates at once. Both sides change the word
 * only by compare-and-swap, so a stop never lands inside a call that is starting.
 */
export const NativeCallState = {
  IDLE: 0,
  NATIVE: 1,
  STOP_AFTER_NATIVE: 2,
  STOPPING: 3,
} as const;

/** The shared word of one inference worker (in its WorkerInit). */
export function createNativeCallState(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
}

/**
 * Emitted on a guarded worker when a stop was asked for while it is inside a native call: it
 * will exit once the call returns, and will answer nothing before. A pool fails its jobs and
 * starts a replacement at once instead of waiting for the exit.
 */
export const STOP_PENDING_EVENT = 'visionserve:stop-pending';

const guarded = new WeakMap<Worker, Int32Array>();

/** Whether a guarded worker is inside a native call now (tests wait for it). */
export function inNativeCall(worker: Worker): boolean {
  const state = guarded.get(worker);
  return state !== undefined && Atomics.load(state, 0) === NativeCallState.NATIVE;
}

/**
 * Main-thread side: replaces `worker.terminate` with a stop that never lands inside a native
 * call (see above). Resolves with the exit code, like `terminate`.
 */
export function guardTerminate(worker: Worker, state: Int32Array): void {
  guarded.set(worker, state);
  const terminate = worker.terminate.bind(worker);
  let exitCode: number | undefined;
  const exited = new Promise<number>((resolve) => {
    worker.once('exit', (code: number) => {
      exitCode = code;
      resolve(code);
    });
  });
  worker.terminate = (): Promise<number> => {
    if (exitCode !== undefined) return Promise.resolve(exitCode);
    for (;;) {
      const now = Atomics.load(state, 0);
      if (now === NativeCallState.IDLE) {
        if (Atomics.compareExchange(state, 0, now, NativeCallState.STOPPING) === now) return terminate();
      } else if (now === NativeCallState.NATIVE) {
        if (Atomics.compareExchange(state, 0, now, NativeCallState.STOP_AFTER_NATIVE) === now) {
          worker.emit(STOP_PENDING_EVENT);
          return exited;
        }
      } else {
        return exited; // a stop is already under way
      }
    }
  };
}

/**
 * Worker side: runs one native call with the word NATIVE. If a stop came meanwhile the thread
 * exits right after the call; if one came before, the call does not start and the returned
 * promise never settles (the thread is being terminated).
 */
export async function nativeCall<T>(state: Int32Array, call: () => Promise<T>): Promise<T> {
  const before = Atomics.compareExchange(state, 0, NativeCallState.IDLE, NativeCallState.NATIVE);
  if (before !== NativeCallState.IDLE) return new Promise<T>(() => undefined);
  try {
    return await call();
  } finally {
    const after = Atomics.compareExchange(state, 0, NativeCallState.NATIVE, NativeCallState.IDLE);
    if (after === NativeCallState.STOP_AFTER_NATIVE) {
      Atomics.store(state, 0, NativeCallState.STOPPING);
      process.exit(1);
    }
  }
}
