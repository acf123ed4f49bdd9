import type { Worker } from 'node:worker_threads';
import { Code, ServingError } from '@visionserve/protocol';
import { abortError } from '../core/abort-error.js';
import type { Logger } from '../util/logger.js';

/** A job's settlement, posted back by the protocol layer that owns the messages. */
export type JobOutcome<R> = { readonly value: R } | { readonly error: ServingError };

/** What the protocol layer sees of a worker, for routing its messages. */
export interface PoolWorker<J> {
  readonly worker: Worker;
  /** The job with this id if it is running on this worker. */
  job(id: number): J | undefined;
  /** Settles a running job of this worker (later settlements of the same job are ignored). */
  settle(id: number, outcome: JobOutcome<unknown>): void;
}

export interface WorkerPoolOptions<J> {
  /** Most workers at once. */
  readonly size: number;
  /** Jobs one worker runs at a time (they interleave at `await`s). */
  readonly concurrencyPerWorker: number;
  /** Jobs waiting for a worker before new ones are refused with UNAVAILABLE. */
  readonly maxQueued: number;
  /**
   * Keep `size` workers alive: a worker that exits is replaced (with backoff) and, while
   * none is alive, jobs fail fast with UNAVAILABLE. Otherwise workers start on demand and
   * a dead one is simply forgotten.
   */
  readonly keepAlive: boolean;
  /** Starts one worker, resolved once it is ready for jobs. */
  readonly spawn: () => Promise<Worker>;
  /** Sends a job to its worker. */
  readonly post: (worker: Worker, id: number, job: J) => void;
  /** Routes a message from a worker (results, errors, calls back into the main thread). */
  readonly onMessage: (from: PoolWorker<J>, message: unknown) => void;
  /**
   * How to stop a worker. `terminate` is only safe for workers that run plain JavaScript:
   * terminating a thread inside a native call (onnxruntime's session.run) aborts the whole
   * process, so inference workers are asked to finish their run and exit on their own.
   */
  readonly stop: (worker: Worker) => Promise<void>;
  /**
   * A running job was aborted (its caller is answered at once). Return true to stop its
   * worker, e.g. a user handler past its deadline may spin forever. Default: let it finish.
   */
  readonly stopOnAbort?: ((reason: ServingError) => boolean) | undefined;
  /** A worker exited without being asked to (it crashed, or a handler called process.exit). */
  readonly onUnexpectedExit?: (() => void) | undefined;
  readonly logger: Logger;
}

/** Per-job options of `submit`. */
export interface SubmitOptions {
  readonly signal?: AbortSignal | undefined;
  /** Remembered by the worker that runs the job, for `retire`. */
  readonly tag?: string | undefined;
  /** Called when the job leaves the queue for a worker. */
  readonly onDispatch?: (() => void) | undefined;
}

export interface WorkerPool<J> {
  submit<R>(job: J, options?: SubmitOptions): Promise<R>;
  /** Workers currently alive. */
  readonly alive: number;
  /** Jobs waiting for a worker. */
  readonly queued: number;
  /** Jobs on a worker (including aborted ones their worker has not finished yet). */
  readonly running: number;
  /** Workers that ran a job whose tag matches are replaced once idle (their loaded modules are dropped). */
  retire(matches: (tag: string) => boolean): void;
  /**
   * Refuses new jobs and fails queued ones with UNAVAILABLE, lets running jobs finish (up
   * to `graceMs`; after it they are failed), then stops every worker.
   */
  close(graceMs?: number): Promise<void>;
}

interface Entry<J> {
  readonly id: number;
  readonly job: J;
  readonly options: SubmitOptions;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: ServingError) => void;
  readonly onAbort: () => void;
  instance: Instance<J> | undefined;
  /** The caller has its answer (result, error or abort). */
  answered: boolean;
}

interface Instance<J> {
  worker: Worker;
  readonly active: Map<number, Entry<J>>;
  readonly tags: Set<string>;
  /** Resolved when the worker has no running job (or has exited). */
  readonly idleWaiters: (() => void)[];
  alive: boolean;
  retiring: boolean;
}

function whenIdle<J>(instance: Instance<J>): Promise<void> {
  if (instance.active.size === 0 || !instance.alive) return Promise.resolve();
  return new Promise((resolve) => instance.idleWaiters.push(resolve));
}

function wakeIdle<J>(instance: Instance<J>): void {
  if (instance.active.size > 0 && instance.alive) return;
  for (const wake of instance.idleWaiters.splice(0)) wake();
}

/** First and largest delay between attempts to replace a dead worker (keepAlive pools), in ms. */
const RESPAWN_FIRST_DELAY_MS = 100;
const RESPAWN_MAX_DELAY_MS = 30_000;

/**
 * A pool of worker threads with a bounded FIFO queue, shared by the inference runtime
 * (one onnxruntime session per worker) and the user-handler host. Jobs are dispatched
 * to the least busy live worker; an aborted job is dropped from the queue or, when
 * running, answered at once while its worker finishes (or is stopped, see stopOnAbort);
 * a worker that dies fails only its own jobs.
 *
 * `initial` are workers already started (loaded models); more are spawned on demand up to
 * `size`, or as replacements in keepAlive pools.
 */
export function createWorkerPool<J>(
  options: WorkerPoolOptions<J>,
  initial: readonly Worker[] = [],
): WorkerPool<J> {
  const { logger: log } = options;
  const instances: Instance<J>[] = [];
  const queue: Entry<J>[] = [];
  let spawning = 0;
  let nextId = 1;
  let closed = false;

  /** Gives the caller its answer once; the job may still occupy its worker (see release). */
  const answer = (entry: Entry<J>, outcome: JobOutcome<unknown>): void => {
    if (entry.answered) return;
    entry.answered = true;
    entry.options.signal?.removeEventListener('abort', entry.onAbort);
    if ('value' in outcome) entry.resolve(outcome.value);
    else entry.reject(outcome.error);
  };

  /** The worker is done with the job: its slot is free again. */
  const release = (entry: Entry<J>): void => {
    const instance = entry.instance;
    if (instance === undefined || !instance.active.delete(entry.id)) return;
    if (instance.retiring && instance.active.size === 0) void stopInstance(instance);
    wakeIdle(instance);
    dispatch();
  };

  const settle = (entry: Entry<J>, outcome: JobOutcome<unknown>): void => {
    answer(entry, outcome);
    release(entry);
  };

  const failAll = (instance: Instance<J>, error: ServingError): void => {
    for (const entry of [...instance.active.values()]) settle(entry, { error });
  };

  const remove = (instance: Instance<J>): void => {
    const index = instances.indexOf(instance);
    if (index >= 0) instances.splice(index, 1);
  };

  const stopInstance = async (instance: Instance<J>): Promise<void> => {
    instance.retiring = true;
    remove(instance);
    if (instance.alive) await options.stop(instance.worker);
  };

  const attach = (worker: Worker): Instance<J> => {
    const instance: Instance<J> = {
      worker,
      active: new Map(),
      tags: new Set(),
      idleWaiters: [],
      alive: true,
      retiring: false,
    };
    const view: PoolWorker<J> = {
      worker,
      job: (id) => instance.active.get(id)?.job,
      settle: (id, outcome) => {
        const entry = instance.active.get(id);
        if (entry !== undefined) settle(entry, outcome);
      },
    };
    worker.on('message', (message: unknown) => {
      options.onMessage(view, message);
    });
    worker.on('error', (error) => {
      log.error('worker failed', { error });
    });
    worker.on('exit', (code) => {
      instance.alive = false;
      remove(instance);
      wakeIdle(instance);
      if (instance.active.size > 0) {
        failAll(instance, new ServingError(Code.INTERNAL, 'Worker stopped'));
      }
      if (closed || instance.retiring) return;
      log.error('worker exited', { code, replacing: options.keepAlive });
      options.onUnexpectedExit?.();
      if (options.keepAlive) {
        if (instances.length === 0 && spawning === 0) {
          for (const entry of queue.splice(0)) {
            settle(entry, { error: new ServingError(Code.UNAVAILABLE, 'No worker available') });
          }
        }
        void replace(RESPAWN_FIRST_DELAY_MS);
      } else {
        dispatch();
      }
    });
    instances.push(instance);
    return instance;
  };

  const replace = async (delayMs: number): Promise<void> => {
    spawning++;
    await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
    try {
      if (closed) return;
      const worker = await options.spawn();
      if (closed) {
        await options.stop(worker);
        return;
      }
      attach(worker);
      log.info('worker replaced');
      dispatch();
    } catch (error) {
      log.error('replacing a worker failed; retrying', { error, delayMs });
      void replace(Math.min(delayMs * 2, RESPAWN_MAX_DELAY_MS));
    } finally {
      spawning--;
    }
  };

  const startOnDemand = (): void => {
    spawning++;
    options.spawn().then(
      (worker) => {
        spawning--;
        if (closed) {
          void options.stop(worker);
          return;
        }
        attach(worker);
        dispatch();
      },
      (error: unknown) => {
        spawning--;
        log.error('starting a worker failed', { error });
        const failure = new ServingError(Code.UNAVAILABLE, 'Cannot start a worker');
        if (instances.length === 0 && spawning === 0)
          for (const entry of queue.splice(0)) settle(entry, { error: failure });
      },
    );
  };

  const dispatch = (): void => {
    while (queue.length > 0 && !closed) {
      let target: Instance<J> | undefined;
      for (const i of instances) {
        if (!i.alive || i.retiring || i.active.size >= options.concurrencyPerWorker) continue;
        if (target === undefined || i.active.size < target.active.size) target = i;
      }
      if (target === undefined) {
        if (!options.keepAlive && instances.filter((i) => !i.retiring).length + spawning < options.size) {
          startOnDemand();
        }
        return;
      }
      const entry = queue.shift()!;
      entry.instance = target;
      target.active.set(entry.id, entry);
      if (entry.options.tag !== undefined) target.tags.add(entry.options.tag);
      entry.options.onDispatch?.();
      options.post(target.worker, entry.id, entry.job);
    }
  };

  for (const worker of initial) attach(worker);

  return {
    submit<R>(job: J, submitOptions: SubmitOptions = {}): Promise<R> {
      if (closed) return Promise.reject(new ServingError(Code.UNAVAILABLE, 'Worker pool is closed'));
      const { signal } = submitOptions;
      if (signal?.aborted) return Promise.reject(abortError(signal));
      if (options.keepAlive && instances.length === 0) {
        return Promise.reject(new ServingError(Code.UNAVAILABLE, 'No worker available'));
      }
      if (queue.length >= options.maxQueued) {
        return Promise.reject(
          new ServingError(Code.UNAVAILABLE, `Queue is full (${queue.length} requests waiting)`, {
            reason: 'overloaded',
          }),
        );
      }
      return new Promise<R>((resolve, reject) => {
        const entry: Entry<J> = {
          id: nextId++,
          job,
          options: submitOptions,
          resolve: resolve as (value: unknown) => void,
          reject,
          instance: undefined,
          answered: false,
          onAbort: () => {
            const reason = abortError(signal!);
            const index = queue.indexOf(entry);
            if (index >= 0) queue.splice(index, 1);
            const instance = entry.instance;
            // A running job keeps its worker until the worker answers; its result is dropped.
            answer(entry, { error: reason });
            if (instance?.alive === true && options.stopOnAbort?.(reason) === true) {
              log.warn('a job was aborted while running; stopping its worker', { code: Code[reason.code] });
              failAll(
                instance,
                new ServingError(Code.INTERNAL, 'Worker restarted after another request timed out'),
              );
              void stopInstance(instance);
            }
          },
        };
        signal?.addEventListener('abort', entry.onAbort, { once: true });
        queue.push(entry);
        dispatch();
      });
    },
    get alive() {
      return instances.filter((i) => i.alive).length;
    },
    get queued() {
      return queue.length;
    },
    get running() {
      let n = 0;
      for (const i of instances) n += i.active.size;
      return n;
    },
    retire(matches) {
      for (const instance of [...instances]) {
        if (![...instance.tags].some(matches)) continue;
        instance.retiring = true;
        if (instance.active.size === 0) void stopInstance(instance);
      }
    },
    async close(graceMs = Infinity) {
      if (closed) return;
      closed = true;
      for (const entry of queue.splice(0)) {
        settle(entry, { error: new ServingError(Code.UNAVAILABLE, 'Server is shutting down') });
      }
      const busy = instances.filter((i) => i.active.size > 0);
      if (busy.length > 0) {
        const drained = Promise.all(busy.map(whenIdle));
        let timer: NodeJS.Timeout | undefined;
        const grace = Number.isFinite(graceMs)
          ? new Promise<void>((resolve) => {
              timer = setTimeout(resolve, graceMs);
            })
          : new Promise<void>(() => undefined);
        await Promise.race([drained, grace]);
        clearTimeout(timer);
        for (const i of busy) failAll(i, new ServingError(Code.UNAVAILABLE, 'Server is shutting down'));
      }
      await Promise.all([...instances].map((i) => stopInstance(i)));
    },
  };
}
