/**
 * Freeing an inference worker's large garbage buffers at once instead of at its next garbage
 * collection (onnx-worker.ts).
 */
import { MessageChannel } from 'node:worker_threads';
import type { WireTensor } from './wire-tensor.js';

/**
 * Gives buffers' memory back now rather than at this thread's next garbage collection.
 * onnxruntime-node copies every output into a new ArrayBuffer; once a large output's copy is in
 * a lent slot it is garbage. Left to V8, a 36 MB output a run kept two or three such buffers
 * resident until a scavenge, and each run's copy landed in fresh, page-faulting memory. Moved
 * into a message on a channel whose ports are closed at once, a buffer is freed when that
 * message is dropped, on the next turn of the event loop (before the next run); the C heap then
 * hands the same pages to the next output. Only plain ArrayBuffers that this thread owns whole
 * go here; if one cannot be moved they are all left to the GC.
 */
export function discardNow(buffers: ReadonlySet<ArrayBuffer>): void {
  const movable = [...buffers].filter((b) => b.byteLength > 0);
  if (movable.length === 0) return;
  const { port1, port2 } = new MessageChannel();
  try {
    port1.postMessage(null, movable);
  } catch {
    // one is not transferable (detached meanwhile, or not ours to move): the GC frees them
  }
  port1.close();
  port2.close();
}

/**
 * What a run leaves to free at once: the outputs copied into slots and then, with them, the
 * request's own input buffers. The garbage outputs were what made V8 scavenge this heap (their
 * size counts as young memory); freed here, they no longer do, and the inputs, left alone,
 * would pile up until V8's external-memory limit forced a full Mark-Compact (seen: one every
 * ~25 detector runs, 5-21 ms each, on this thread). A run that lends nothing leaves both to V8,
 * as before.
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
