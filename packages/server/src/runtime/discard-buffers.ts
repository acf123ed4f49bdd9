/**
 * Freeing an inference worker's large garbage buffers at once instead of at its next garbage
 * collection (onnx-worker.ts).
 */
import { MessageChannel } from 'node:worker_threads';
import type { WireTensor } from './wire-tensor.js';

/**
 * Gives buffers' memory back now rather than at this thread's next garbage collection.
 * onnxruntime-node (1.30) copies every output into a new ArrayBuffer; once a large output's
 * copy is in a lent slot it is garbage. Left to V8, a 36 MB output a run kept two or three such
 * buffers resident until a scavenge. Moved into a message on a channel whose ports are closed at
 * once, a buffer is freed when Node drops that message with the closed port (a later turn of
 * the event loop; Node behaviour, not a documented guarantee). With the malloc settings of our
 * launchers (malloc-tuning.ts) the freed block stays in the C heap and the next output reuses
 * its pages; with glibc's defaults a 36 MB block is unmapped, so only the resident memory drops.
 * Only plain ArrayBuffers this thread owns whole belong here. A buffer that cannot be moved is
 * skipped (Node 20 ignores it; later Nodes throw, and then the GC frees them all). Best effort:
 * never throws.
 */
export function discardNow(buffers: ReadonlySet<ArrayBuffer>): void {
  try {
    const movable = [...buffers].filter((b) => b.byteLength > 0);
    if (movable.length === 0) return;
    const { port1, port2 } = new MessageChannel();
    try {
      port1.postMessage(null, movable);
    } finally {
      port1.close();
      port2.close();
    }
  } catch {
    // not movable (untransferable on Node 21+, or detached meanwhile): the GC frees them
  }
}

/**
 * What a run leaves to free at once: the outputs copied into slots and, with them, the request's
 * own input buffers (a Set: inputs sharing one buffer name it once). Measured on the 34 MB
 * detector: with only the outputs freed, V8 stopped scavenging this heap for them and the 1.2 MB
 * inputs piled up until its external-memory limit forced a Mark-Compact on this thread every
 * ~25 runs (5-21 ms each); freeing the inputs too removed them. Runs that lend nothing (every
 * output moved with the result) showed no major collection in the worker and are left to V8 as
 * before.
 */
export function spentBuffers(
  inputs: readonly WireTensor[],
  copiedOutputs: ReadonlySet<ArrayBuffer>,
): Set<ArrayBuffer> {
  if (copiedOutputs.size === 0) return new Set();
  const spent = new Set(copiedOutputs);
  for (const t of inputs) if (t.dtype !== 'string' && t.buffer instanceof ArrayBuffer) spent.add(t.buffer);
  return spent;
}
