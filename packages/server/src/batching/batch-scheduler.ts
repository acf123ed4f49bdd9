import { unavailable } from '@visionserve/protocol';
import type { Logger } from '../util/logger.js';

/** TF Serving's message for a refused task (shared_batch_scheduler.h). */
export const QUEUE_FULL_MESSAGE = 'The batch scheduling queue to which this task was submitted is full';

export interface BatchSchedulerOptions {
  /**
   * Batches in flight at once across every queue of the server (TF Serving's
   * `num_batch_threads` of the shared batch thread pool). Default 1.
   */
  readonly numBatchThreads?: number;
  /** Receives faults of batch processing callbacks (which must not reject). */
  readonly logger: Logger;
}

export interface BatchQueueOptions {
  /** Rows per batch at most (the execution batch size). */
  readonly maxBatchSize: number;
  /** Time a partial batch waits for more tasks, in microseconds (timer resolution: 1 ms). */
  readonly batchTimeoutMicros: number;
  /** Batches (the open one included) the queue holds before it refuses tasks. */
  readonly maxEnqueuedBatches: number;
  /** Batches of this queue in flight at once at most (besides the scheduler's limit). */
  readonly maxInFlightBatches: number;
}

/** Anything with a row count. */
export interface BatchTask {
  readonly size: number;
}

/** A closed batch handed to the queue's process callback. */
export interface Batch<T extends BatchTask> {
  readonly tasks: readonly T[];
  /** Sum of the tasks' sizes. */
  readonly size: number;
}

/**
 * One queue of same-shaped tasks (one model version and input signature).
 * All methods are synchronous, so a capacity check followed by `schedule`
 * calls is atomic.
 */
export interface BatchQueue<T extends BatchTask> {
  /**
   * Adds a task to the open batch, or closes it and opens a new one when the
   * task does not fit. Throws UNAVAILABLE (QUEUE_FULL_MESSAGE) when a new batch
   * would exceed maxEnqueuedBatches, UNAVAILABLE when the queue is closed; the
   * task is then not enqueued. A task larger than maxBatchSize is the caller's error
   * (it becomes a batch of its own).
   */
  schedule(task: T): void;
  /** Rows that can still be enqueued: room in the open batch plus in new batches (TF's SchedulingCapacity). */
  capacity(): number;
  /** Rows that still fit into the open batch. */
  openBatchRoom(): number;
  /** Removes a task that has not started; false if it is running, done or unknown. */
  remove(task: T): boolean;
  /** Tasks waiting (not yet handed to the process callback). */
  queuedTasks(): number;
  /** True when nothing is queued or running. */
  idle(): boolean;
  /**
   * Stops accepting tasks and detaches the queue from the scheduler; returns
   * the tasks that were still queued (they will not run). Resolves `drained`
   * once the batches in flight have finished.
   */
  close(): { readonly dropped: readonly T[]; readonly drained: Promise<void> };
}

export interface BatchScheduler {
  /**
   * Adds a queue whose batches are passed to `process`. `process` must settle
   * every task of the batch itself and should not reject (a rejection is
   * logged). The scheduler serves queues round-robin.
   */
  addQueue<T extends BatchTask>(
    options: BatchQueueOptions,
    process: (batch: Batch<T>) => Promise<void>,
  ): BatchQueue<T>;
  /** Batches running now, over all queues. */
  inFlightBatches(): number;
}

interface OpenBatch<T> {
  tasks: T[];
  size: number;
  /** The timeout of the open batch elapsed (or the batch was closed). */
  ready: boolean;
  timer: NodeJS.Timeout | undefined;
}

interface QueueState {
  /** A batch can be taken now. */
  schedulable(): boolean;
  /** Takes the next batch and starts it (the scheduler has counted it in flight). */
  start(): Promise<void>;
  /** Called after a batch of this queue finished and was uncounted. */
  batchDone(): void;
  inFlight: number;
  readonly maxInFlight: number;
}

/** The scheduler's state, shared by the module-level functions below. */
interface Scheduler {
  readonly numThreads: number;
  readonly logger: Logger;
  readonly queues: QueueState[];
  /** Round-robin position among the queues. */
  next: number;
  inFlight: number;
  pumpPending: boolean;
}

/** The queue of the next schedulable batch, round-robin from `next`. */
function pickQueue(sch: Scheduler): QueueState | undefined {
  const { queues } = sch;
  for (let i = 0; i < queues.length; i++) {
    const q = queues[(sch.next + i) % queues.length]!;
    if (q.inFlight < q.maxInFlight && q.schedulable()) {
      sch.next = (sch.next + i + 1) % queues.length;
      return q;
    }
  }
  return undefined;
}

function pump(sch: Scheduler): void {
  sch.pumpPending = false;
  while (sch.inFlight < sch.numThreads && sch.queues.length > 0) {
    const q = pickQueue(sch);
    if (q === undefined) return;
    sch.inFlight++;
    q.inFlight++;
    void q
      .start()
      .catch((error: unknown) => {
        sch.logger.error('batch processing failed', { error });
      })
      .finally(() => {
        sch.inFlight--;
        q.inFlight--;
        q.batchDone();
        requestPump(sch);
      });
  }
}

function requestPump(sch: Scheduler): void {
  if (sch.pumpPending) return;
  sch.pumpPending = true;
  setImmediate(() => {
    pump(sch);
  });
}

/** One queue's batches, shared by the module-level functions below. */
interface Queue<T extends BatchTask> {
  readonly sch: Scheduler;
  readonly qo: BatchQueueOptions;
  readonly process: (batch: Batch<T>) => Promise<void>;
  readonly closedBatches: OpenBatch<T>[];
  open: OpenBatch<T>;
  closed: boolean;
  onDrained: (() => void) | undefined;
  drained: Promise<void> | undefined;
  /** What the scheduler sees of this queue; set right after the queue is made. */
  state: QueueState;
}

const freshBatch = <T>(): OpenBatch<T> => ({ tasks: [], size: 0, ready: false, timer: undefined });

function closeOpen<T extends BatchTask>(q: Queue<T>): void {
  if (q.open.timer) clearTimeout(q.open.timer);
  q.open.timer = undefined;
  q.open.ready = true;
  q.closedBatches.push(q.open);
  q.open = freshBatch();
}

function schedulable<T extends BatchTask>(q: Queue<T>): boolean {
  const { open, qo } = q;
  if (q.closedBatches.some((b) => b.size > 0)) return true;
  return open.size > 0 && (open.ready || open.size >= qo.maxBatchSize || qo.batchTimeoutMicros === 0);
}

function startBatch<T extends BatchTask>(q: Queue<T>): Promise<void> {
  let batch: OpenBatch<T> | undefined;
  while (q.closedBatches.length > 0 && batch === undefined) {
    const b = q.closedBatches.shift()!;
    if (b.size > 0) batch = b;
  }
  if (batch === undefined) {
    batch = q.open;
    if (batch.timer) clearTimeout(batch.timer);
    q.open = freshBatch();
  }
  return q.process({ tasks: batch.tasks, size: batch.size });
}

const queuedTasks = <T extends BatchTask>(q: Queue<T>): number =>
  q.closedBatches.reduce((n, b) => n + b.tasks.length, q.open.tasks.length);
const enqueuedBatches = <T extends BatchTask>(q: Queue<T>): number => q.closedBatches.length + 1;

function schedule<T extends BatchTask>(q: Queue<T>, task: T): void {
  const { qo } = q;
  if (q.closed) throw unavailable('The batch queue is closed');
  if (q.open.size > 0 && q.open.size + task.size > qo.maxBatchSize) {
    if (enqueuedBatches(q) >= qo.maxEnqueuedBatches) throw unavailable(QUEUE_FULL_MESSAGE);
    closeOpen(q);
  }
  const open = q.open;
  open.tasks.push(task);
  open.size += task.size;
  if (open.tasks.length === 1 && qo.batchTimeoutMicros > 0 && open.size < qo.maxBatchSize) {
    open.timer = setTimeout(() => {
      open.timer = undefined;
      open.ready = true;
      requestPump(q.sch);
    }, qo.batchTimeoutMicros / 1000);
  }
  requestPump(q.sch);
}

function capacity<T extends BatchTask>(q: Queue<T>): number {
  const { qo } = q;
  if (q.closed) return 0;
  const newBatches = Math.max(0, qo.maxEnqueuedBatches - enqueuedBatches(q));
  return newBatches * qo.maxBatchSize + Math.max(0, qo.maxBatchSize - q.open.size);
}

function removeTask<T extends BatchTask>(q: Queue<T>, task: T): boolean {
  for (const b of [...q.closedBatches, q.open]) {
    const i = b.tasks.indexOf(task);
    if (i < 0) continue;
    b.tasks.splice(i, 1);
    b.size -= task.size;
    if (b.tasks.length === 0) {
      if (b.timer) clearTimeout(b.timer);
      b.timer = undefined;
      if (b === q.open) b.ready = false;
      else q.closedBatches.splice(q.closedBatches.indexOf(b), 1);
    }
    return true;
  }
  return false;
}

function closeQueue<T extends BatchTask>(
  q: Queue<T>,
): { readonly dropped: readonly T[]; readonly drained: Promise<void> } {
  const dropped: T[] = [];
  if (!q.closed) {
    q.closed = true;
    for (const b of [...q.closedBatches, q.open]) {
      if (b.timer) clearTimeout(b.timer);
      dropped.push(...b.tasks);
    }
    q.closedBatches.length = 0;
    q.open = freshBatch();
    const { queues } = q.sch;
    const i = queues.indexOf(q.state);
    if (i >= 0) queues.splice(i, 1);
    if (q.sch.next >= queues.length) q.sch.next = 0;
  }
  q.drained ??=
    q.state.inFlight === 0
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          q.onDrained = resolve;
        });
  return { dropped, drained: q.drained };
}

function addQueue<T extends BatchTask>(
  sch: Scheduler,
  qo: BatchQueueOptions,
  process: (batch: Batch<T>) => Promise<void>,
): BatchQueue<T> {
  const q: Queue<T> = {
    sch,
    qo,
    process,
    closedBatches: [],
    open: freshBatch(),
    closed: false,
    onDrained: undefined,
    drained: undefined,
    state: undefined as unknown as QueueState,
  };
  q.state = {
    inFlight: 0,
    maxInFlight: Math.max(1, qo.maxInFlightBatches),
    schedulable: () => schedulable(q),
    start: () => startBatch(q),
    batchDone: () => {
      if (q.closed && q.state.inFlight === 0) q.onDrained?.();
    },
  };
  sch.queues.push(q.state);
  return {
    schedule: (task) => {
      schedule(q, task);
    },
    capacity: () => capacity(q),
    openBatchRoom: () => (q.closed ? 0 : Math.max(0, qo.maxBatchSize - q.open.size)),
    remove: (task) => removeTask(q, task),
    queuedTasks: () => queuedTasks(q),
    idle: () => q.state.inFlight === 0 && queuedTasks(q) === 0,
    close: () => closeQueue(q),
  };
}

/**
 * A shared batch scheduler (TF Serving's SharedBatchScheduler, written from
 * its documented semantics): each queue keeps closed batches and one open
 * batch; a batch becomes schedulable when it is full, when its oldest task has
 * waited `batchTimeoutMicros`, or when a later task did not fit. Free batch
 * "threads" (in-flight slots) take schedulable batches round-robin across
 * queues. Scheduling is deferred by one `setImmediate`, so the tasks decoded in
 * the same I/O turn can share a batch even with a zero timeout.
 */
export function createBatchScheduler(options: BatchSchedulerOptions): BatchScheduler {
  const sch: Scheduler = {
    numThreads: Math.max(1, options.numBatchThreads ?? 1),
    logger: options.logger,
    queues: [],
    next: 0,
    inFlight: 0,
    pumpPending: false,
  };
  return {
    addQueue: (qo, process) => addQueue(sch, qo, process),
    inFlightBatches: () => sch.inFlight,
  };
}
