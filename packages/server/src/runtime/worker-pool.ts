import type { Worker } from 'node:worker_threads';
import { Code, ServingError } from '@visionserve/protocol';
import { abortError } from '../core/abort-error.js';
import type { Logger } from '../util/logger.js';
import { STOP_PENDING_EVENT } from './native-call-guard.js';

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

/** The state of one pool, shared by the module-level functions below. */
interface Pool<J> {
  readonly options: WorkerPoolOptions<J>;
  readonly log: Logger;
  readonly instances: Instance<J>[];
  readonly queue: Entry<J>[];
  spawning: number;
  nextId: number;
  closed: boolean;
}

/** Gives the caller its answer once; the job may still occupy its worker (see release). */
function answer<J>(entry: Entry<J>, outcome: JobOutcome<unknown>): void {
  if (entry.answered) return;
  entry.answered = true;
  entry.options.signal?.removeEventListener('abort', entry.onAbort);
  if ('value' in outcome) entry.resolve(outcome.value);
  else entry.reject(outcome.error);
}

/** The worker is done with the job: its slot is free again. */
function release<J>(pool: Pool<J>, entry: Entry<J>): void {
  const instance = entry.instance;
  if (instance === undefined || !instance.active.delete(entry.id)) return;
  if (instance.retiring && instance.active.size === 0) void stopInstance(pool, instance);
  wakeIdle(instance);
  dispatch(pool);
}

function settle<J>(pool: Pool<J>, entry: Entry<J>, outcome: JobOutcome<unknown>): void {
  answer(entry, outcome);
  release(pool, entry);
}

function failAll<J>(pool: Pool<J>, instance: Instance<J>, error: ServingError): void {
  for (const entry of [...instance.active.values()]) settle(pool, entry, { error });
}

function failQueued<J>(pool: Pool<J>, error: ServingError): void {
  for (const entry of pool.queue.splice(0)) settle(pool, entry, { error });
}

function remove<J>(pool: Pool<J>, instance: Instance<J>): void {
  const index = pool.instances.indexOf(instance);
  if (index >= 0) pool.instances.splice(index, 1);
}

async function stopInstance<J>(pool: Pool<J>, instance: Instance<J>): Promise<void> {
  instance.retiring = true;
  remove(pool, instance);
  if (instance.alive) await pool.options.stop(instance.worker);
}

/**
 * The worker is gone for the pool: it exited, or it was asked to stop inside a native call
 * (STOP_PENDING_EVENT: it exits once the call returns and answers nothing before). Its jobs
 * fail, and a keepAlive pool replaces it at once.
 */
function lose<J>(pool: Pool<J>, instance: Instance<J>, how: { code?: number; pending?: true }): void {
  if (!instance.alive) return;
  instance.alive = false;
  remove(pool, instance);
  wakeIdle(instance);
  if (instance.active.size > 0) {
    const message = how.pending
      ? 'The worker running this request was stopped during its run'
      : 'Worker stopped';
    failAll(pool, instance, new ServingError(Code.INTERNAL, message));
  }
  if (pool.closed || instance.retiring) return;
  const { options } = pool;
  pool.log.error(how.pending ? 'worker stopped during a run' : 'worker exited', {
    ...(how.code === undefined ? {} : { code: how.code }),
    replacing: options.keepAlive,
  });
  options.onUnexpectedExit?.();
  if (!options.keepAlive) {
    dispatch(pool);
    return;
  }
  if (pool.instances.length === 0 && pool.spawning === 0) {
    failQueued(pool, new ServingError(Code.UNAVAILABLE, 'No worker available'));
  }
  void replace(pool, RESPAWN_FIRST_DELAY_MS);
}

function attach<J>(pool: Pool<J>, worker: Worker): Instance<J> {
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
      if (entry !== undefined) settle(pool, entry, outcome);
    },
  };
  worker.on('message', (message: unknown) => {
    pool.options.onMessage(view, message);
  });
  worker.on('error', (error) => {
    pool.log.error('worker failed', { error });
  });
  worker.on(STOP_PENDING_EVENT, () => {
    lose(pool, instance, { pending: true });
  });
  worker.on('exit', (code: number) => {
    lose(pool, instance, { code });
  });
  pool.instances.push(instance);
  return instance;
}

async function replace<J>(pool: Pool<J>, delayMs: number): Promise<void> {
  pool.spawning++;
  await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
  try {
    if (pool.closed) return;
    const worker = await pool.options.spawn();
    if (pool.closed) {
      await pool.options.stop(worker);
      return;
    }
    attach(pool, worker);
    pool.log.info('worker replaced');
    dispatch(pool);
  } catch (error) {
    pool.log.error('replacing a worker failed; retrying', { error, delayMs });
    void replace(pool, Math.min(delayMs * 2, RESPAWN_MAX_DELAY_MS));
  } finally {
    pool.spawning--;
  }
}

function startOnDemand<J>(pool: Pool<J>): void {
  pool.spawning++;
  pool.options.spawn().then(
    (worker) => {
      pool.spawning--;
      if (pool.closed) {
        void pool.options.stop(worker);
        return;
      }
      attach(pool, worker);
      dispatch(pool);
    },
    (error: unknown) => {
      pool.spawning--;
      pool.log.error('starting a worker failed', { error });
      if (pool.instances.length === 0 && pool.spawning === 0) {
        failQueued(pool, new ServingError(Code.UNAVAILABLE, 'Cannot start a worker'));
      }
    },
  );
}

/** The least busy live worker with room for one more job, if any. */
function leastBusy<J>(pool: Pool<J>): Instance<J> | undefined {
  let target: Instance<J> | undefined;
  for (const i of pool.instances) {
    if (!i.alive || i.retiring || i.active.size >= pool.options.concurrencyPerWorker) continue;
    if (target === undefined || i.active.size < target.active.size) target = i;
  }
  return target;
}

function dispatch<J>(pool: Pool<J>): void {
  const { options, queue } = pool;
  while (queue.length > 0 && !pool.closed) {
    const target = leastBusy(pool);
    if (target === undefined) {
      const starting = pool.instances.filter((i) => !i.retiring).length + pool.spawning;
      if (!options.keepAlive && starting < options.size) startOnDemand(pool);
      return;
    }
    const entry = queue.shift()!;
    entry.instance = target;
    target.active.set(entry.id, entry);
    if (entry.options.tag !== undefined) target.tags.add(entry.options.tag);
    entry.options.onDispatch?.();
    options.post(target.worker, entry.id, entry.job);
  }
}

/** The caller gave up: dropped from the queue, or answered while its worker finishes. */
function abortEntry<J>(pool: Pool<J>, entry: Entry<J>, signal: AbortSignal): void {
  const reason = abortError(signal);
  const index = pool.queue.indexOf(entry);
  if (index >= 0) pool.queue.splice(index, 1);
  const instance = entry.instance;
  // A running job keeps its worker until the worker answers; its result is dropped.
  answer(entry, { error: reason });
  if (instance?.alive === true && pool.options.stopOnAbort?.(reason) === true) {
    pool.log.warn('a job was aborted while running; stopping its worker', { code: Code[reason.code] });
    failAll(
      pool,
      instance,
      new ServingError(Code.INTERNAL, 'Worker restarted after another request timed out'),
    );
    void stopInstance(pool, instance);
  }
}

function submit<J, R>(pool: Pool<J>, job: J, submitOptions: SubmitOptions): Promise<R> {
  if (pool.closed) return Promise.reject(new ServingError(Code.UNAVAILABLE, 'Worker pool is closed'));
  const { signal } = submitOptions;
  if (signal?.aborted) return Promise.reject(abortError(signal));
  if (pool.options.keepAlive && pool.instances.length === 0) {
    return Promise.reject(new ServingError(Code.UNAVAILABLE, 'No worker available'));
  }
  if (pool.queue.length >= pool.options.maxQueued) {
    return Promise.reject(
      new ServingError(Code.UNAVAILABLE, `Queue is full (${pool.queue.length} requests waiting)`, {
        reason: 'overloaded',
      }),
    );
  }
  return new Promise<R>((resolve, reject) => {
    const entry: Entry<J> = {
      id: pool.nextId++,
      job,
      options: submitOptions,
      resolve: resolve as (value: unknown) => void,
      reject,
      instance: undefined,
      answered: false,
      onAbort: () => {
        abortEntry(pool, entry, signal!);
      },
    };
    signal?.addEventListener('abort', entry.onAbort, { once: true });
    pool.queue.push(entry);
    dispatch(pool);
  });
}

function retire<J>(pool: Pool<J>, matches: (tag: string) => boolean): void {
  for (const instance of [...pool.instances]) {
    if (![...instance.tags].some(matches)) continue;
    instance.retiring = true;
    if (instance.active.size === 0) void stopInstance(pool, instance);
  }
}

async function close<J>(pool: Pool<J>, graceMs: number): Promise<void> {
  if (pool.closed) return;
  pool.closed = true;
  failQueued(pool, new ServingError(Code.UNAVAILABLE, 'Server is shutting down'));
  const busy = pool.instances.filter((i) => i.active.size > 0);
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
    for (const i of busy) failAll(pool, i, new ServingError(Code.UNAVAILABLE, 'Server is shutting down'));
  }
  await Promise.all([...pool.instances].map((i) => stopInstance(pool, i)));
}

/**
 * A pool of worker threads with a bounded FIFO queue, shared by the inference runtime
 * (one onnxruntime session per worker) and the user-handler host. Jobs are dispatched
 * to the least busy live worker; an aborted job is dropped from the queue or, when
 * running, answered at once while its worker finishes (or is stopped, see stopOnAbort);
 * a worker that dies, or is stopped inside a native call, fails only its own jobs.
 *
 * `initial` are workers already started (loaded models); more are spawned on demand up to
 * `size`, or as replacements in keepAlive pools.
 */
export function createWorkerPool<J>(
  options: WorkerPoolOptions<J>,
  initial: readonly Worker[] = [],
): WorkerPool<J> {
  const pool: Pool<J> = {
    options,
    log: options.logger,
    instances: [],
    queue: [],
    spawning: 0,
    nextId: 1,
    closed: false,
  };
  for (const worker of initial) attach(pool, worker);
  return {
    submit: <R>(job: J, submitOptions: SubmitOptions = {}) => submit<J, R>(pool, job, submitOptions),
    get alive() {
      return pool.instances.filter((i) => i.alive).length;
    },
    get queued() {
      return pool.queue.length;
    },
    get running() {
      let n = 0;
      for (const i of pool.instances) n += i.active.size;
      return n;
    },
    retire: (matches) => {
      retire(pool, matches);
    },
    close: (graceMs = Infinity) => close(pool, graceMs),
  };
}
