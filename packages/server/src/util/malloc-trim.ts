/**
 * glibc's `malloc_trim(0)`: gives the free memory of every malloc arena back to the system
 * (MADV_DONTNEED on free pages, the top of each heap shrunk). glibc returns only a free heap
 * top on its own; memory freed below live allocations (a burst's request bodies, decoded
 * tensors, decompressed pieces, from the main thread and every worker thread's arena) stays
 * resident until the same sizes are asked for again. Measured with bench/hostile-json-rss.mjs
 * (60 s of hostile JSON, the malloc settings of malloc-tuning.ts): RSS 15 s after the campaign
 * +146 MiB over before without a trim, +10 MiB with the idle collection's trim
 * (docs/adr/0003-malloc-trim-through-koffi.md).
 *
 * Node has no way to call it, so it goes through koffi (a maintained FFI library with
 * prebuilt binaries, an optional dependency); where koffi or glibc is missing, there is no trim.
 */
import { createRequire } from 'node:module';

/** Trims the malloc heaps; returns whether any memory went back. */
export type MallocTrim = () => boolean;

interface Koffi {
  load(path: string): { func(signature: string): (pad: number) => number };
}

let loaded: MallocTrim | null | undefined;

/** `malloc_trim(0)` of this process's glibc, or undefined (not Linux with glibc, or no koffi). */
export function mallocTrim(): MallocTrim | undefined {
  if (loaded !== undefined) return loaded ?? undefined;
  loaded = null;
  if (process.platform !== 'linux') return undefined;
  try {
    // glibc's soname: on another C library (musl) there is no such file, or no malloc_trim in it.
    const koffi = createRequire(import.meta.url)('koffi') as Koffi;
    const trim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)');
    loaded = () => trim(0) === 1;
  } catch {
    // koffi not installed (an optional dependency) or no binary for this platform.
  }
  return loaded ?? undefined;
}
