import { Worker } from 'node:worker_threads';
import {
  Code,
  type FastJsonFormat,
  type NumericPredictBody,
  ServingError,
  fastBodyFromMessage,
  parseTfsJsonText,
  readFastJsonBody,
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
  /**
   * Most shared memory kept for bodies that decode threads read (JsonDecoder.bodyBuffer),
   * lent and free together, in bytes. Default 64 MiB; 0 lends none (each body is copied to
   * its thread).
   */
  readonly sharedBodyBytes?: number | undefined;
  /** The decode thread's module. Default json-decode-worker.js (tests give others). */
  readonly workerUrl?: URL | undefined;
}

const WORKER_URL = new URL('./json-decode-worker.js', import.meta.url);

/** Decode speed assumed before the first measurement, in ms per byte (≈ 10 ms per MB). */
const INITIAL_MS_PER_BYTE = 1e-5;
/** Weight of the newest measurement in the speed estimate. */
const EWMA = 0.2;

interface Job {
  readonly bytes: number;
  readonly resolve: (message: FromDecodeWorker | undefined) => void;
}

interface DecodeThread {
  readonly worker: Worker;
  readonly jobs: Map<number, Job>;
  pendingBytes: number;
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
  if (thread.jobs.size > 0 || error !== undefined) {
    d.logger.error('JSON decode thread stopped; its bodies are read on the event loop', {
      why,
      pending: thread.jobs.size,
      error,
    });
  }
  for (const job of thread.jobs.values()) job.resolve(undefined);
  thread.jobs.clear();
}

function spawn(d: Decoder): DecodeThread {
  const { options } = d;
  // Without V8's memory reducer, like the inference workers: its full GCs ran on the decode
  // thread between bodies, inside the next request's latency (worker-memory-reducer.ts).
  const worker = startWithoutMemoryReducer(
    () => new Worker(options.workerUrl ?? WORKER_URL, { workerData: { nice: options.threadNice ?? 0 } }),
  );
  worker.unref();
  const thread: DecodeThread = { worker, jobs: new Map(), pendingBytes: 0 };
  worker.on('message', (reply: FromDecodeWorker) => {
    const job = thread.jobs.get(reply.id);
    if (job === undefined) return;
    thread.jobs.delete(reply.id);
    thread.pendingBytes -= job.bytes;
    if (thread.jobs.size === 0) worker.unref();
    if (reply.failure !== undefined)
      d.logger.error('JSON decode thread failed on a body', { error: reply.failure });
    job.resolve(reply);
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

/** The thread with the least work queued; a new one while some are busy and fewer than `threads` run. */
function pick(d: Decoder): DecodeThread {
  let best: DecodeThread | undefined;
  for (const t of d.pool) if (best === undefined || t.pendingBytes < best.pendingBytes) best = t;
  if ((best === undefined || best.pendingBytes > 0) && d.pool.length < d.threads) return spawn(d);
  return best!;
}

/** The read on the event loop; `general`: a tfs-predict body the reader refuses is parsed generally. */
function inline(d: Decoder, format: FastJsonFormat, bytes: Uint8Array, general: boolean): unknown {
  d.counts.inline++;
  const started = performance.now();
  try {
    return (
      readFastJsonBody(format, bytes) ??
      (general
        ? parseTfsJsonText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'))
        : undefined)
    );
  } finally {
    measured(d, bytes.byteLength, performance.now() - started);
  }
}

/** Sends a body to a decode thread; undefined when the thread stopped before answering. */
function readOffThread(
  d: Decoder,
  format: FastJsonFormat,
  bytes: Uint8Array,
  general: boolean,
): Promise<FromDecodeWorker | undefined> {
  const thread = pick(d);
  const id = d.nextId++;
  // The thread reads shared memory as it is; other bodies it gets a copy of: the caller
  // keeps `bytes` (inexact numbers are read again from it, and it is the fallback if the
  // thread dies).
  const shared = bytes.buffer instanceof SharedArrayBuffer;
  const copy = shared ? bytes : new Uint8Array(bytes);
  return new Promise<FromDecodeWorker | undefined>((resolve) => {
    // A thread holds the process open only while it has bodies to answer.
    if (thread.jobs.size === 0) thread.worker.ref();
    thread.jobs.set(id, { bytes: bytes.byteLength, resolve });
    thread.pendingBytes += bytes.byteLength;
    const message: ToDecodeWorker = {
      id,
      format,
      bytes: copy,
      ...(general ? { general } : {}),
      ...(shared && d.slots.has(bytes.buffer) && bytes.byteOffset === 0 ? { tail: true } : {}),
    };
    thread.worker.postMessage(message, shared ? [] : [copy.buffer as ArrayBuffer]);
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
    const reply = await readOffThread(d, format, bytes, general);
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
  const error = new ServingError(
    Code.UNAVAILABLE,
    `Server is overloaded: about ${Math.round(wait)} ms of JSON decoding queued (limit ${maxWaitMs} ms); retry later`,
    { reason: 'overloaded' },
  );
  d.options.onShed?.(undefined, error);
  throw error;
}

function sizeOf(bytes: number): number {
  return Number.isFinite(bytes) && bytes > 0 ? bytes : 0;
}

function admit(d: Decoder, bytes: number): DecodeTicket {
  const size = sizeOf(bytes);
  check(d, size);
  d.admittedBytes += size;
  d.admittedBodies++;
  let held = true;
  return {
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
    for (const job of t.jobs.values()) job.resolve(undefined);
    t.jobs.clear();
  }
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
    admit: (bytes) => admit(d, bytes),
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
