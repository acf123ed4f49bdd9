import { Worker } from 'node:worker_threads';
import {
  type FastJsonFormat,
  type NumericPredictBody,
  ServingError,
  fastBodyFromMessage,
  parseTfsJsonText,
  readFastJsonBody,
  type JsonLimits,
  NO_JSON_LIMITS,
  checkJsonLimits,
  overloadedError,
} from '@visionserve/protocol';
import type { DecodeTicket, JsonDecoder } from '../contracts/json-decoder.js';
import type { Logger } from '../util/logger.js';
import type { FromDecodeWorker, ToDecodeWorker } from './json-decode-messages.js';
import { createSharedBodyPool } from './shared-body-pool.js';
import { startWithoutMemoryReducer } from './worker-memory-reducer.js';

/** The pool as server.ts holds it: the frontends' contract, and a way to stop it. */
export interface JsonDecodePool extends JsonDecoder {
  /**
   * Starts one decode thread now if none runs (threads otherwise start on first use), so the
   * first big body does not wait for the thread's start and the reader's warm-up.
   */
  prestart(): void;
  /** Bodies lent shared memory (bodyBuffer) and not released yet, and the memory kept for them in bytes. */
  bodySlots(): { readonly lent: number; readonly keptBytes: number };
  /** Stops the decode threads (pending reads fall back to the caller's path). */
  close(): Promise<void>;
}

export interface JsonDecodePoolOptions {
  /** Decode threads; 0 reads every body on the event loop (admission still applies). */
  readonly threads: number;
  /** Bodies smaller than this are read on the event loop, in bytes. Default 65536. */
  readonly minBytes?: number;
  /** Longest decode backlog a new body may join, in ms; 0 admits everything. */
  readonly maxWaitMs: number;
  /** Bodies per decode thread admitted whatever the backlog (a burst is never refused). Default 0. */
  readonly burstPerThread?: number | undefined;
  readonly logger: Logger;
  /** Told of every refusal (e.g. to log that shedding started). Default: nothing. */
  readonly onShed?: ((model: undefined, error: ServingError) => void) | undefined;
  /** Nice value of the decode threads (thread-priority.ts). Default 0 (the event loop's). */
  readonly threadNice?: number | undefined;
  /** A decode thread's heap quiet this long gets one full GC (util/idle-collection.ts); absent: never. */
  readonly idleGcAfterMs?: number | undefined;
  /**
   * Most shared memory kept for bodies that decode threads read (JsonDecoder.bodyBuffer),
   * lent and free together, in bytes. Default 64 MiB; 0 lends none (each body is copied to
   * its thread).
   */
  readonly sharedBodyBytes?: number | undefined;
  /**
   * Structural limits of a body (nesting, keys of an object, values): past one, the read
   * rejects with INVALID_ARGUMENT, at the point of the body where the scan passed it. Default:
   * none.
   */
  readonly limits?: JsonLimits | undefined;
  /** The decode thread's module. Default json-decode-worker.js (tests give others). */
  readonly workerUrl?: URL | undefined;
}

const WORKER_URL = new URL('./json-decode-worker.js', import.meta.url);

/** Decode speed assumed before the first measurement, in ms per byte (≈ 10 ms per MB). */
const INITIAL_MS_PER_BYTE = 1e-5;
/** Weight of the newest measurement in the speed estimate. */
const EWMA = 0.2;

interface Job {
  readonly message: ToDecodeWorker;
  readonly transfer: ArrayBuffer[];
  /** Settles the read: the thread's reply, or undefined (read it here instead). */
  readonly resolve: (message: FromDecodeWorker | undefined) => void;
}

interface DecodeThread {
  readonly worker: Worker;
  /** The body this thread reads now (one at a time: the others wait in the pool's queue). */
  job: Job | undefined;
}

/** The pool's state, shared by the module-level functions below. */
interface Decoder {
  readonly options: JsonDecodePoolOptions;
  readonly threads: number;
  readonly minBytes: number;
  readonly logger: Logger;
  /** Decode speed estimate (EWMA), ms per byte. */
  msPerByte: number;
  /** Bytes of admitted bodies not decoded yet. */
  admittedBytes: number;
  /** Admitted bodies not decoded yet. */
  admittedBodies: number;
  nextId: number;
  closed: boolean;
  readonly pool: DecodeThread[];
  /** Bodies waiting for a free thread, oldest first. */
  readonly queue: Job[];
  readonly limits: JsonLimits;
  readonly counts: { offThread: number; inline: number };
  readonly bodies: ReturnType<typeof createSharedBodyPool>;
  /** The slots' memory (a body in one owns the slot's memory after it too). */
  readonly slots: WeakSet<ArrayBufferLike>;
}

function measured(d: Decoder, bytes: number, ms: number): void {
  if (bytes >= d.minBytes) d.msPerByte += EWMA * (ms / bytes - d.msPerByte);
}

function retire(d: Decoder, thread: DecodeThread, why: string, error?: unknown): void {
  const at = d.pool.indexOf(thread);
  if (at < 0) return;
  d.pool.splice(at, 1);
  const job = thread.job;
  thread.job = undefined;
  if (job !== undefined || error !== undefined) {
    d.logger.error('JSON decode thread stopped; its body is read on the event loop', {
      why,
      pending: job === undefined ? 0 : 1,
      error,
    });
  }
  job?.resolve(undefined);
  dispatch(d);
}

function spawn(d: Decoder): DecodeThread {
  const { options } = d;
  // Without V8's memory reducer, like the inference workers: its full GCs ran on the decode
  // thread between bodies, inside the next request's latency (worker-memory-reducer.ts).
  const worker = startWithoutMemoryReducer(
    () =>
      new Worker(options.workerUrl ?? WORKER_URL, {
        workerData: { nice: options.threadNice ?? 0, limits: d.limits, idleGcAfterMs: options.idleGcAfterMs },
      }),
  );
  worker.unref();
  const thread: DecodeThread = { worker, job: undefined };
  worker.on('message', (reply: FromDecodeWorker) => {
    const job = thread.job;
    if (job === undefined || job.message.id !== reply.id) return;
    thread.job = undefined;
    worker.unref();
    if (reply.failure !== undefined)
      d.logger.error('JSON decode thread failed on a body', { error: reply.failure });
    job.resolve(reply);
    dispatch(d);
  });
  worker.on('error', (error) => {
    retire(d, thread, 'error', error);
  });
  worker.on('exit', (code) => {
    retire(d, thread, `exit ${code}`);
  });
  d.pool.push(thread);
  return thread;
}

/**
 * Hands waiting bodies to free threads, starting threads up to `threads`: a body waits only
 * while every thread reads another, never behind a body queued on a busy thread.
 */
function dispatch(d: Decoder): void {
  while (d.queue.length > 0) {
    let thread = d.pool.find((t) => t.job === undefined);
    if (thread === undefined && d.pool.length < d.threads && !d.closed) thread = spawn(d);
    if (thread === undefined) return;
    const job = d.queue.shift()!;
    thread.job = job;
    // A thread holds the process open only while it reads a body.
    thread.worker.ref();
    thread.worker.postMessage(job.message, job.transfer);
  }
}

/** The read on the event loop; `general`: a tfs-predict body the reader refuses is parsed generally. */
function inline(d: Decoder, format: FastJsonFormat, bytes: Uint8Array, general: boolean): unknown {
  d.counts.inline++;
  const started = performance.now();
  try {
    const fast = readFastJsonBody(format, bytes, undefined, d.limits);
    if (fast !== undefined) return fast;
    // What the reader did not take goes to JSON.parse (here or in the caller): only within the limits.
    checkJsonLimits(bytes, d.limits);
    return general
      ? parseTfsJsonText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'))
      : undefined;
  } finally {
    measured(d, bytes.byteLength, performance.now() - started);
  }
}

/**
 * A body's reply from a decode thread once one is free to read it (undefined when the thread
 * stopped before answering); rejects with the signal's reason when the request aborts
 * (deadline, client gone) while the body still waits: it leaves the queue unread. A body a
 * thread reads already is read to the end (the thread may be writing into a lent slot that
 * must not be lent again before it is done).
 */
function readOffThread(
  d: Decoder,
  format: FastJsonFormat,
  bytes: Uint8Array,
  general: boolean,
  signal: AbortSignal | undefined,
): Promise<FromDecodeWorker | undefined> {
  // The thread reads shared memory as it is; other bodies it gets a copy of: the caller
  // keeps `bytes` (inexact numbers are read again from it, and it is the fallback if the
  // thread dies).
  const shared = bytes.buffer instanceof SharedArrayBuffer;
  const copy = shared ? bytes : new Uint8Array(bytes);
  const message: ToDecodeWorker = {
    id: d.nextId++,
    format,
    bytes: copy,
    ...(general ? { general } : {}),
    ...(shared && d.slots.has(bytes.buffer) && bytes.byteOffset === 0 ? { tail: true } : {}),
  };
  return new Promise<FromDecodeWorker | undefined>((resolve, reject) => {
    const onAbort = (): void => {
      const at = d.queue.indexOf(job);
      if (at < 0) return;
      d.queue.splice(at, 1);
      reject(signal!.reason as Error);
    };
    const job: Job = {
      message,
      transfer: shared ? [] : [copy.buffer as ArrayBuffer],
      resolve: (reply) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(reply);
      },
    };
    if (signal?.aborted === true) {
      reject(signal.reason as Error);
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    d.queue.push(job);
    dispatch(d);
  });
}

async function decode(
  d: Decoder,
  format: FastJsonFormat,
  bytes: Uint8Array,
  ticket: DecodeTicket | undefined,
  general: boolean,
): Promise<unknown> {
  try {
    if (d.threads <= 0 || d.closed || bytes.byteLength < d.minBytes) return inline(d, format, bytes, general);
    const reply = await readOffThread(d, format, bytes, general, ticket?.signal);
    if (reply === undefined) return inline(d, format, bytes, general);
    d.counts.offThread++;
    measured(d, bytes.byteLength, reply.ms);
    if (reply.error !== undefined) throw new ServingError(reply.error.code, reply.error.message);
    if (reply.failure !== undefined) return general ? inline(d, format, bytes, general) : undefined;
    return reply.body === undefined ? undefined : fastBodyFromMessage(reply.body, bytes);
  } finally {
    ticket?.release();
  }
}

/** Throws UNAVAILABLE when a body of `size` bytes would make the backlog too long (past the burst). */
function check(d: Decoder, size: number): void {
  const { maxWaitMs } = d.options;
  const burst = (d.options.burstPerThread ?? 0) * Math.max(1, d.threads);
  if (maxWaitMs <= 0 || d.admittedBytes === 0 || d.admittedBodies < burst) return;
  const wait = ((d.admittedBytes + size) * d.msPerByte) / Math.max(1, d.threads);
  if (wait <= maxWaitMs) return;
  const error = overloadedError(
    `Server is overloaded: about ${Math.round(wait)} ms of JSON decoding queued (limit ${maxWaitMs} ms); retry later`,
  );
  d.options.onShed?.(undefined, error);
  throw error;
}

function sizeOf(bytes: number): number {
  return Number.isFinite(bytes) && bytes > 0 ? bytes : 0;
}

function admit(d: Decoder, bytes: number, signal: AbortSignal | undefined): DecodeTicket {
  const size = sizeOf(bytes);
  check(d, size);
  d.admittedBytes += size;
  d.admittedBodies++;
  let held = true;
  return {
    signal,
    release() {
      if (!held) return;
      held = false;
      d.admittedBytes -= size;
      d.admittedBodies--;
    },
  };
}

async function close(d: Decoder): Promise<void> {
  d.closed = true;
  const stopping = d.pool.splice(0);
  for (const t of stopping) {
    t.job?.resolve(undefined);
    t.job = undefined;
  }
  for (const job of d.queue.splice(0)) job.resolve(undefined);
  await Promise.all(stopping.map((t) => t.worker.terminate()));
}

export function createJsonDecodePool(options: JsonDecodePoolOptions): JsonDecodePool {
  const minBytes = options.minBytes ?? 65_536;
  const d: Decoder = {
    options,
    threads: options.threads,
    minBytes,
    logger: options.logger,
    msPerByte: INITIAL_MS_PER_BYTE,
    admittedBytes: 0,
    admittedBodies: 0,
    nextId: 1,
    closed: false,
    pool: [],
    queue: [],
    limits: options.limits ?? NO_JSON_LIMITS,
    counts: { offThread: 0, inline: 0 },
    bodies: createSharedBodyPool({ maxBytes: options.sharedBodyBytes, minSlotBytes: minBytes }),
    slots: new WeakSet(),
  };
  const read = (format: FastJsonFormat, bytes: Uint8Array, ticket?: DecodeTicket): Promise<unknown> =>
    decode(d, format, bytes, ticket, false);
  return {
    check: (bytes) => {
      check(d, sizeOf(bytes));
    },
    admit: (bytes, call) => admit(d, bytes, call?.signal),
    bodyBuffer(bytes) {
      if (d.threads <= 0 || d.closed || !(bytes >= minBytes)) return undefined;
      // Twice the body: the decoded values go into the second half (ToDecodeWorker.tail).
      const slot = d.bodies.acquire(bytes, 2 * bytes);
      if (slot !== undefined) d.slots.add(slot.bytes.buffer);
      return slot;
    },
    async readNumericPredictBody(bytes, ticket) {
      return (await read('tfs-predict', bytes, ticket)) as NumericPredictBody | undefined;
    },
    readTfsPredictBody: (bytes, ticket) => decode(d, 'tfs-predict', bytes, ticket, true),
    read,
    backlogMs: () => (d.admittedBytes * d.msPerByte) / Math.max(1, d.threads),
    counts: d.counts,
    bodySlots: () => ({ lent: d.bodies.lent, keptBytes: d.bodies.keptBytes }),
    prestart() {
      if (!d.closed && d.threads > 0 && d.pool.length === 0) spawn(d);
    },
    close: () => close(d),
  };
}
