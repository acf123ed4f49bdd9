import { Worker } from 'node:worker_threads';
import {
  Code,
  type FastJsonFormat,
  type NumericPredictBody,
  ServingError,
  fastBodyFromMessage,
  parseTfsJsonText,
  readFastJsonBody,
  type JsonLimits,
  NO_JSON_LIMITS,
  checkJsonLimits,
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
  readonly bytes: number;
  readonly message: ToDecodeWorker;
  readonly transfer: ArrayBuffer[];
  /** Settles the decode: the thread's reply, or undefined (read it here instead). */
  readonly resolve: (message: FromDecodeWorker | undefined) => void;
}

interface DecodeThread {
  readonly worker: Worker;
  /** The body this thread reads now (one at a time: the others wait in the pool's queue). */
  job: Job | undefined;
}

export function createJsonDecodePool(options: JsonDecodePoolOptions): JsonDecodePool {
  const { threads, maxWaitMs, logger } = options;
  const minBytes = options.minBytes ?? 65_536;
  const limits = options.limits ?? NO_JSON_LIMITS;
  let msPerByte = INITIAL_MS_PER_BYTE;
  let admittedBytes = 0;
  let nextId = 1;
  let closed = false;
  const pool: DecodeThread[] = [];
  /** Bodies waiting for a free thread, oldest first. */
  const queue: Job[] = [];
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
    const job = thread.job;
    thread.job = undefined;
    if (job !== undefined || error !== undefined) {
      logger.error('JSON decode thread stopped; its body is read on the event loop', {
        why,
        pending: job === undefined ? 0 : 1,
        error,
      });
    }
    job?.resolve(undefined);
    dispatch();
  };

  const spawn = (): DecodeThread => {
    // Without V8's memory reducer, like the inference workers: its full GCs ran on the decode
    // thread between bodies, inside the next request's latency (worker-memory-reducer.ts).
    const worker = startWithoutMemoryReducer(
      () =>
        new Worker(options.workerUrl ?? WORKER_URL, {
          workerData: { nice: options.threadNice ?? 0, limits },
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
        logger.error('JSON decode thread failed on a body', { error: reply.failure });
      job.resolve(reply);
      dispatch();
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

  /**
   * Hands waiting bodies to free threads, starting threads up to `threads`: a body waits only
   * while every thread reads another, never behind a body queued on a busy thread.
   */
  const dispatch = (): void => {
    while (queue.length > 0) {
      let thread = pool.find((t) => t.job === undefined);
      if (thread === undefined && pool.length < threads && !closed) thread = spawn();
      if (thread === undefined) return;
      const job = queue.shift()!;
      thread.job = job;
      // A thread holds the process open only while it reads a body.
      thread.worker.ref();
      thread.worker.postMessage(job.message, job.transfer);
    }
  };

  /** The read on the event loop; `general`: a tfs-predict body the reader refuses is parsed generally. */
  const inline = (format: FastJsonFormat, bytes: Uint8Array, general: boolean): unknown => {
    counts.inline++;
    const started = performance.now();
    try {
      const fast = readFastJsonBody(format, bytes, undefined, limits);
      if (fast !== undefined) return fast;
      checkJsonLimits(bytes, limits);
      return general
        ? parseTfsJsonText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'))
        : undefined;
    } finally {
      measured(bytes.byteLength, performance.now() - started);
    }
  };

  /**
   * The thread's reply for one body, once a thread is free to read it; rejects with the
   * ticket's abort reason when the request is aborted (deadline, client gone) while its body
   * still waits for a thread: it leaves the queue unread.
   */
  const onThread = (
    format: FastJsonFormat,
    bytes: Uint8Array,
    general: boolean,
    signal: AbortSignal | undefined,
  ): Promise<FromDecodeWorker | undefined> => {
    // The thread reads shared memory as it is; other bodies it gets a copy of: the caller
    // keeps `bytes` (inexact numbers are read again from it, and it is the fallback if the
    // thread dies).
    const shared = bytes.buffer instanceof SharedArrayBuffer;
    const copy = shared ? bytes : new Uint8Array(bytes);
    const message: ToDecodeWorker = {
      id: nextId++,
      format,
      bytes: copy,
      ...(general ? { general } : {}),
      ...(shared && slots.has(bytes.buffer) && bytes.byteOffset === 0 ? { tail: true } : {}),
    };
    return new Promise<FromDecodeWorker | undefined>((resolve, reject) => {
      // A body a thread reads already is read to the end (the thread may be writing into a
      // lent slot that must not be lent again before it is done); one still waiting leaves.
      const onAbort = (): void => {
        const at = queue.indexOf(job);
        if (at < 0) return;
        queue.splice(at, 1);
        reject(signal!.reason as Error);
      };
      const job: Job = {
        bytes: bytes.byteLength,
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
      queue.push(job);
      dispatch();
    });
  };

  const decode = async (
    format: FastJsonFormat,
    bytes: Uint8Array,
    ticket: DecodeTicket | undefined,
    general: boolean,
  ): Promise<unknown> => {
    try {
      if (threads <= 0 || closed || bytes.byteLength < minBytes) return inline(format, bytes, general);
      const reply = await onThread(format, bytes, general, ticket?.signal);
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

  return {
    admit(bytes, call) {
      const size = Number.isFinite(bytes) && bytes > 0 ? bytes : 0;
      if (maxWaitMs > 0 && admittedBytes > 0) {
        const wait = ((admittedBytes + size) * msPerByte) / Math.max(1, threads);
        if (wait > maxWaitMs) {
          const error = new ServingError(
            Code.UNAVAILABLE,
            `Server is overloaded: about ${Math.round(wait)} ms of JSON decoding queued (limit ${maxWaitMs} ms); retry later`,
            { reason: 'overloaded' },
          );
          options.onShed?.(undefined, error);
          throw error;
        }
      }
      admittedBytes += size;
      let held = true;
      return {
        signal: call?.signal,
        release() {
          if (!held) return;
          held = false;
          admittedBytes -= size;
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
        t.job?.resolve(undefined);
        t.job = undefined;
      }
      for (const job of queue.splice(0)) job.resolve(undefined);
      await Promise.all(stopping.map((t) => t.worker.terminate()));
    },
  };
}
