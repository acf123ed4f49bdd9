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

export function createJsonDecodePool(options: JsonDecodePoolOptions): JsonDecodePool {
  const { threads, maxWaitMs, logger } = options;
  const minBytes = options.minBytes ?? 65_536;
  let msPerByte = INITIAL_MS_PER_BYTE;
  let admittedBytes = 0;
  let nextId = 1;
  let closed = false;
  const pool: DecodeThread[] = [];
  const counts = { offThread: 0, inline: 0 };
  const bodies = createSharedBodyPool({ maxBytes: options.sharedBodyBytes, minSlotBytes: minBytes });
  /** The slots' memory (a body in one owns the slot's memory after it too). */
  const slots = new WeakSet<ArrayBufferLike>();

  const measured = (bytes: number, ms: number): void => {
    if (bytes >= minBytes) msPerByte += EWMA * (ms / bytes - msPerByte);
  };

  const backlogMs = (): number => (admittedBytes * msPerByte) / Math.max(1, threads);

  const retire = (thread: DecodeThread, why: string, error?: unknown): void => {
    const at = pool.indexOf(thread);
    if (at < 0) return;
    pool.splice(at, 1);
    if (thread.jobs.size > 0 || error !== undefined) {
      logger.error('JSON decode thread stopped; its bodies are read on the event loop', {
        why,
        pending: thread.jobs.size,
        error,
      });
    }
    for (const job of thread.jobs.values()) job.resolve(undefined);
    thread.jobs.clear();
  };

  const spawn = (): DecodeThread => {
    // Without V8's memory reducer, like the inference workers: its full GCs ran on the decode
    // thread between bodies, inside the next request's latency (worker-memory-reducer.ts).
    const worker = startWithoutMemoryReducer(
      () =>
        new Worker(options.workerUrl ?? WORKER_URL, {
          workerData: { nice: options.threadNice ?? 0 },
        }),
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
        logger.error('JSON decode thread failed on a body', { error: reply.failure });
      job.resolve(reply);
    });
    worker.on('error', (error) => {
      retire(thread, 'error', error);
    });
    worker.on('exit', (code) => {
      retire(thread, `exit ${code}`);
    });
    pool.push(thread);
    return thread;
  };

  /** The thread with the least work queued; a new one while some are busy and fewer than `threads` run. */
  const pick = (): DecodeThread => {
    let best: DecodeThread | undefined;
    for (const t of pool) if (best === undefined || t.pendingBytes < best.pendingBytes) best = t;
    if ((best === undefined || best.pendingBytes > 0) && pool.length < threads) return spawn();
    return best!;
  };

  /** The read on the event loop; `general`: a tfs-predict body the reader refuses is parsed generally. */
  const inline = (format: FastJsonFormat, bytes: Uint8Array, general: boolean): unknown => {
    counts.inline++;
    const started = performance.now();
    try {
      return (
        readFastJsonBody(format, bytes) ??
        (general
          ? parseTfsJsonText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'))
          : undefined)
      );
    } finally {
      measured(bytes.byteLength, performance.now() - started);
    }
  };

  const decode = async (
    format: FastJsonFormat,
    bytes: Uint8Array,
    ticket: DecodeTicket | undefined,
    general: boolean,
  ): Promise<unknown> => {
    try {
      if (threads <= 0 || closed || bytes.byteLength < minBytes) return inline(format, bytes, general);
      const thread = pick();
      const id = nextId++;
      // The thread reads shared memory as it is; other bodies it gets a copy of: the caller
      // keeps `bytes` (inexact numbers are read again from it, and it is the fallback if the
      // thread dies).
      const shared = bytes.buffer instanceof SharedArrayBuffer;
      const copy = shared ? bytes : new Uint8Array(bytes);
      const reply = await new Promise<FromDecodeWorker | undefined>((resolve) => {
        // A thread holds the process open only while it has bodies to answer.
        if (thread.jobs.size === 0) thread.worker.ref();
        thread.jobs.set(id, { bytes: bytes.byteLength, resolve });
        thread.pendingBytes += bytes.byteLength;
        const message: ToDecodeWorker = {
          id,
          format,
          bytes: copy,
          ...(general ? { general } : {}),
          ...(shared && slots.has(bytes.buffer) && bytes.byteOffset === 0 ? { tail: true } : {}),
        };
        thread.worker.postMessage(message, shared ? [] : [copy.buffer as ArrayBuffer]);
      });
      if (reply === undefined) return inline(format, bytes, general);
      counts.offThread++;
      measured(bytes.byteLength, reply.ms);
      if (reply.error !== undefined) throw new ServingError(reply.error.code, reply.error.message);
      if (reply.failure !== undefined) return general ? inline(format, bytes, general) : undefined;
      return reply.body === undefined ? undefined : fastBodyFromMessage(reply.body, bytes);
    } finally {
      ticket?.release();
    }
  };

  const read = (format: FastJsonFormat, bytes: Uint8Array, ticket?: DecodeTicket): Promise<unknown> =>
    decode(format, bytes, ticket, false);

  const burst = (options.burstPerThread ?? 0) * Math.max(1, threads);
  let admittedBodies = 0;
  /** Throws UNAVAILABLE when a body of `size` bytes would make the backlog too long. */
  const check = (size: number): void => {
    if (maxWaitMs <= 0 || admittedBytes === 0 || admittedBodies < burst) return;
    const wait = ((admittedBytes + size) * msPerByte) / Math.max(1, threads);
    if (wait <= maxWaitMs) return;
    const error = new ServingError(
      Code.UNAVAILABLE,
      `Server is overloaded: about ${Math.round(wait)} ms of JSON decoding queued (limit ${maxWaitMs} ms); retry later`,
      { reason: 'overloaded' },
    );
    options.onShed?.(undefined, error);
    throw error;
  };
  const sizeOf = (bytes: number): number => (Number.isFinite(bytes) && bytes > 0 ? bytes : 0);

  return {
    check(bytes) {
      check(sizeOf(bytes));
    },

    admit(bytes) {
      const size = sizeOf(bytes);
      check(size);
      admittedBytes += size;
      admittedBodies++;
      let held = true;
      return {
        release() {
          if (!held) return;
          held = false;
          admittedBytes -= size;
          admittedBodies--;
        },
      };
    },

    bodyBuffer(bytes) {
      if (threads <= 0 || closed || !(bytes >= minBytes)) return undefined;
      // Twice the body: the decoded values go into the second half (ToDecodeWorker.tail).
      const slot = bodies.acquire(bytes, 2 * bytes);
      if (slot !== undefined) slots.add(slot.bytes.buffer);
      return slot;
    },

    async readNumericPredictBody(bytes, ticket) {
      return (await read('tfs-predict', bytes, ticket)) as NumericPredictBody | undefined;
    },

    readTfsPredictBody(bytes, ticket) {
      return decode('tfs-predict', bytes, ticket, true);
    },

    read,

    backlogMs,
    counts,

    bodySlots() {
      return { lent: bodies.lent, keptBytes: bodies.keptBytes };
    },

    prestart() {
      if (!closed && threads > 0 && pool.length === 0) spawn();
    },

    async close() {
      closed = true;
      const stopping = pool.splice(0);
      for (const t of stopping) {
        for (const job of t.jobs.values()) job.resolve(undefined);
        t.jobs.clear();
      }
      await Promise.all(stopping.map((t) => t.worker.terminate()));
    },
  };
}
