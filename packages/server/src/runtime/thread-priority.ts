import { getPriority, setPriority } from 'node:os';

/**
 * Lowers the calling thread's CPU priority to `nice` (Linux: nice values are per thread;
 * threads it starts afterwards, such as onnxruntime's pool, inherit it). Worker threads run
 * at a lower priority than the event loop so that, when the cores are oversubscribed,
 * the thread that reads requests, refuses excess ones and writes answers gets the CPU
 * first; the workers lose nothing on an idle core. Elsewhere (where a nice value applies
 * to the whole process) and for `nice` <= 0 it does nothing. Returns whether it applied.
 */
export function lowerThreadPriority(nice: number): boolean {
  if (process.platform !== 'linux' || !(nice > 0)) return false;
  try {
    setPriority(0, Math.min(19, Math.max(getPriority(0), Math.round(nice))));
    return true;
  } catch {
    return false;
  }
}
