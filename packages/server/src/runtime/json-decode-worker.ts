/**
 * A JSON decode thread (see json-decode-pool.ts): reads JSON tensor bodies (TF Serving
 * predict, SageMaker JSON, KServe v2 inference requests) with the fast numeric reader and
 * sends the tensors' arrays back (transferred). A body the
 * reader does not take is answered `undefined` (the main thread then parses it itself), or,
 * for a `general` TF Serving predict body, parsed here by the general path.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThreadPriority } from './thread-priority.js';
import {
  type JsonLimits,
  NO_JSON_LIMITS,
  ServingError,
  checkJsonLimits,
  fastBodyToMessage,
  parseTfsJsonText,
  parsedBodyToMessage,
  readFastJsonBody,
} from '@visionserve/protocol';
import type { FromDecodeWorker, ToDecodeWorker } from './json-decode-messages.js';
import { startIdleCollection } from '../util/idle-collection.js';
import type { FastBodyMessage } from '@visionserve/protocol';

const port = parentPort;
if (port === null) throw new Error('json-decode-worker.js runs as a worker thread');
const data = workerData as { nice?: number; limits?: JsonLimits; idleGcAfterMs?: number } | null;
lowerThreadPriority(data?.nice ?? 0);
// Decode threads run without V8's memory reducer (worker-memory-reducer.ts): a burst of large
// bodies would leave their heaps grown until the next burst.
startIdleCollection({ quietMs: data?.idleGcAfterMs ?? 0 });
const limits = data?.limits ?? NO_JSON_LIMITS;

/**
 * Runs the reader (and the float32 rounding of fastBodyToMessage) over a small synthetic
 * body until V8 has optimized them: cold, the first
 * 3 MB body took ~300 ms in the interpreter instead of ~30 ms (measured, Node 20).
 */
function warmUp(): void {
  // Every path of the reader: nesting, whitespace, signs, exponents, 17-digit numbers, and
  // both ways of growing the arrays sized from the first row.
  const spell = [
    (i: number) => String(Math.fround(Math.sin(i) * 3)),
    (i: number) => (i / 7 - 20).toFixed(3),
    (i: number) => String(i - 300),
    (i: number) => `${(i % 9) + 1}.5e-${i % 4}`,
    () => '-0',
  ];
  const body = (first: number, rest: number): Buffer => {
    let i = 0;
    const level = (dims: readonly number[], sep: string): string =>
      dims.length === 0
        ? spell[i++ < 3 ? first : (rest + i) % (rest === 0 ? 1 : spell.length)]!(i)
        : `[${Array.from({ length: dims[0]! }, () => level(dims.slice(1), sep)).join(sep)}]`;
    return Buffer.from(`{"instances": ${level([2, 16, 16, 3], first === 0 ? ', ' : ',\n ')}}`);
  };
  const bodies = [body(0, 0), body(0, 1), body(1, 0), body(2, 0)];
  for (let i = 0; i < 12; i++) for (const b of bodies) fastBodyToMessage(readFastJsonBody('tfs-predict', b));
}
warmUp();

/**
 * The array this thread reads each body's first tensor into (readFastJsonBody's scratch),
 * kept from body to body so that a steady stream of bodies allocates none; grown to fit the
 * biggest tensor seen, up to SCRATCH_CAP elements.
 */
let scratch = new Float64Array(0);
const SCRATCH_CAP = 1 << 21;

/**
 * Where a tensor's values go: into the slot's memory after the body (ToDecodeWorker.tail)
 * while they fit, the receiver reading them there; else moved, as a copy when they view
 * the scratch array (which stays here).
 */
function placer(job: ToDecodeWorker): (values: Float64Array) => Float64Array | undefined {
  const bytes = job.bytes;
  const buffer = bytes.buffer;
  let at = job.tail === true ? Math.ceil((bytes.byteOffset + bytes.byteLength) / 8) * 8 : buffer.byteLength;
  return (values) => {
    if (at + values.byteLength <= buffer.byteLength) {
      const placed = new Float64Array(buffer, at, values.length);
      placed.set(values);
      at += values.byteLength;
      return placed;
    }
    return values.buffer === scratch.buffer ? values.slice() : undefined;
  };
}

/** Grows the scratch array after a body with a tensor that outgrew it (the next one then fits). */
function keepScratch(message: FastBodyMessage): void {
  let most = 0;
  for (const { parts } of message.packed) most = Math.max(most, parts.values.length);
  if (most <= scratch.length || scratch.length >= SCRATCH_CAP) return;
  // Room for the reader's estimate of the values (a little above their count).
  scratch = new Float64Array(Math.min(SCRATCH_CAP, Math.ceil(most * 1.25) + 1024));
}

/** Smallest array moved to the main thread rather than copied with the message. */
const MOVE_MIN_BYTES = 65_536;

/**
 * The buffers worth moving: node checks each buffer of a transfer list against all before it
 * (a body of 100,000 one-number tensors took 15 s there), and a small one costs less to copy.
 */
function movable(transfer: readonly ArrayBuffer[]): ArrayBuffer[] {
  return transfer.filter((buffer) => buffer.byteLength >= MOVE_MIN_BYTES);
}

port.on('message', (job: ToDecodeWorker) => {
  const started = performance.now();
  let reply: FromDecodeWorker;
  let transfer: ArrayBuffer[] = [];
  try {
    const body = readFastJsonBody(job.format, job.bytes, scratch, limits);
    // What the reader did not take goes to JSON.parse (here or on the main thread): only
    // within the limits.
    if (body === undefined) checkJsonLimits(job.bytes, limits);
    if (body === undefined && job.general === true) {
      const b = job.bytes;
      const parsed = parseTfsJsonText(Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'));
      const moved = parsedBodyToMessage(parsed);
      transfer = moved.transfer;
      reply = { id: job.id, ms: performance.now() - started, body: moved.message };
    } else if (body === undefined) {
      reply = { id: job.id, ms: performance.now() - started, body: undefined };
    } else {
      // Values left in the slot's shared memory are slower to convert on the event loop (V8
      // reads shared memory element by element): the float32 values a float32 input takes come
      // ready from here.
      const moved = fastBodyToMessage(body, placer(job), job.tail === true);
      keepScratch(moved.message);
      transfer = moved.transfer;
      reply = { id: job.id, ms: performance.now() - started, body: moved.message };
    }
  } catch (error) {
    if (error instanceof ServingError) {
      // The general path's answer to text that is not JSON, or a body past the limits: the
      // caller's error.
      reply = {
        id: job.id,
        ms: performance.now() - started,
        body: undefined,
        error: { code: error.code, message: error.message },
      };
      port.postMessage(reply);
      return;
    }
    // The reader refuses nothing by throwing; whatever got here, the main thread's general
    // path gives the body its proper answer.
    reply = {
      id: job.id,
      ms: performance.now() - started,
      body: undefined,
      failure: error instanceof Error ? error.message : String(error),
    };
  }
  try {
    port.postMessage(reply, movable(transfer));
  } catch (error) {
    // A tree that cannot be cloned: the main thread's general path answers instead.
    port.postMessage({
      id: job.id,
      ms: performance.now() - started,
      body: undefined,
      failure: error instanceof Error ? error.message : String(error),
    } satisfies FromDecodeWorker);
  }
});
