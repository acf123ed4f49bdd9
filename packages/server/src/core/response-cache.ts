import { createHash } from 'node:crypto';
import { type Tensor, byteSize, isStringData, toBytes } from '@visionserve/protocol';

/** Counters of a response cache (monotonic except `entries` and `bytes`). */
export interface ResponseCacheStats {
  /** Requests answered from the cache. */
  readonly hits: number;
  /** Requests of opted-in models that had to run. */
  readonly misses: number;
  /** Entries dropped to stay within the byte bound (not counting invalidations). */
  readonly evictions: number;
  /** Entries dropped because their version was unloaded or its assets changed. */
  readonly invalidations: number;
  /** Responses too large to cache at all. */
  readonly uncacheable: number;
  /** Entries held now. */
  readonly entries: number;
  /** Bytes held now (outputs plus a fixed overhead per entry). */
  readonly bytes: number;
  /** The byte bound. */
  readonly maxBytes: number;
}

/** Per-model counters, for metrics labelled by model. */
export interface ResponseCacheModelStats {
  readonly hits: number;
  readonly misses: number;
  readonly evictions: number;
}

export interface ResponseCacheOptions {
  /** Most bytes the cache holds (outputs plus ENTRY_OVERHEAD_BYTES per entry). Must be > 0. */
  readonly maxBytes: number;
  /** Largest response cached, in bytes. Default: maxBytes / 4. */
  readonly maxEntryBytes?: number | undefined;
}

/**
 * Triton's response cache for TF Serving-style predicts: outputs by a hash of the
 * request (see `responseCacheKey`), least recently used first out, bounded in bytes.
 * Entries belong to one model version and are dropped when it unloads or its assets
 * change. Stored and returned tensors are copies, so callers may transfer or mutate
 * what they get.
 */
export interface ResponseCache {
  /** A copy of the cached outputs for `key`, counting a hit or a miss for `model`. */
  lookup(key: string, model: string): Record<string, Tensor> | undefined;
  /** Stores a copy of `outputs` (evicting least recently used entries to fit). */
  insert(key: string, model: string, version: number, outputs: Readonly<Record<string, Tensor>>): void;
  /** Drops every entry of a model version (all versions when `version` is omitted). */
  invalidate(model: string, version?: number): void;
  stats(): ResponseCacheStats;
  modelStats(): ReadonlyMap<string, ResponseCacheModelStats>;
}

/** Bytes charged per entry besides its tensors (key, maps, shapes). */
export const ENTRY_OVERHEAD_BYTES = 256;

interface Entry {
  readonly model: string;
  readonly version: number;
  readonly outputs: Record<string, Tensor>;
  readonly bytes: number;
}

function copyTensor(t: Tensor): Tensor {
  if (isStringData(t.data))
    return { dtype: t.dtype, shape: [...t.shape], data: t.data.map((b) => b.slice()) };
  return { dtype: t.dtype, shape: [...t.shape], data: t.data.slice() };
}

function copyAll(outputs: Readonly<Record<string, Tensor>>): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [k, t] of Object.entries(outputs)) out[k] = copyTensor(t);
  return out;
}

export function createResponseCache(options: ResponseCacheOptions): ResponseCache {
  const maxBytes = options.maxBytes;
  if (!(maxBytes > 0)) throw new RangeError('response cache maxBytes must be positive');
  const maxEntryBytes = Math.min(options.maxEntryBytes ?? Math.floor(maxBytes / 4), maxBytes);
  /** Insertion order = recency order: the first key is the least recently used. */
  const entries = new Map<string, Entry>();
  const perModel = new Map<string, { hits: number; misses: number; evictions: number }>();
  let bytes = 0;
  let hits = 0;
  let misses = 0;
  let evictions = 0;
  let invalidations = 0;
  let uncacheable = 0;

  const counters = (model: string): { hits: number; misses: number; evictions: number } => {
    let c = perModel.get(model);
    if (c === undefined) {
      c = { hits: 0, misses: 0, evictions: 0 };
      perModel.set(model, c);
    }
    return c;
  };

  const drop = (key: string, entry: Entry): void => {
    entries.delete(key);
    bytes -= entry.bytes;
  };

  return {
    lookup(key, model) {
      const entry = entries.get(key);
      if (entry === undefined) {
        misses++;
        counters(model).misses++;
        return undefined;
      }
      entries.delete(key);
      entries.set(key, entry);
      hits++;
      counters(model).hits++;
      return copyAll(entry.outputs);
    },

    insert(key, model, version, outputs) {
      let size = ENTRY_OVERHEAD_BYTES;
      for (const t of Object.values(outputs)) size += byteSize(t) + 8 * t.shape.length;
      if (size > maxEntryBytes) {
        uncacheable++;
        return;
      }
      const old = entries.get(key);
      if (old !== undefined) drop(key, old);
      for (const [k, e] of entries) {
        if (bytes + size <= maxBytes) break;
        drop(k, e);
        evictions++;
        counters(e.model).evictions++;
      }
      entries.set(key, { model, version, outputs: copyAll(outputs), bytes: size });
      bytes += size;
    },

    invalidate(model, version) {
      for (const [k, e] of entries) {
        if (e.model === model && (version === undefined || e.version === version)) {
          drop(k, e);
          invalidations++;
        }
      }
    },

    stats() {
      return { hits, misses, evictions, invalidations, uncacheable, entries: entries.size, bytes, maxBytes };
    },

    modelStats() {
      return new Map([...perModel].map(([m, c]) => [m, { ...c }]));
    },
  };
}

/**
 * The cache key of a request: SHA-256 over the model name, resolved version, signature
 * name, the output aliases asked for (sorted) and every input (alias, dtype, shape and
 * bytes, aliases sorted). Requests that differ in any of them never share an entry.
 */
export function responseCacheKey(
  model: string,
  version: number,
  signatureName: string,
  outputAliases: readonly string[],
  inputs: Readonly<Record<string, Tensor>>,
): string {
  const hash = createHash('sha256');
  const text = (s: string): void => {
    hash.update(`${s.length}:${s};`);
  };
  text(model);
  text(String(version));
  text(signatureName);
  text([...outputAliases].sort().join(','));
  for (const alias of Object.keys(inputs).sort()) {
    const t = inputs[alias]!;
    text(alias);
    text(t.dtype);
    text(t.shape.join(','));
    if (isStringData(t.data)) {
      for (const b of t.data) {
        text(String(b.byteLength));
        hash.update(b);
      }
    } else {
      hash.update(toBytes(t.data));
    }
  }
  return hash.digest('base64');
}
