import { Counter, Histogram, type Registry } from 'prom-client';

/** Rows in an executed batch (TF Serving's and ours). */
export const BATCH_BUCKETS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256];

/** Caches label children of a metric by their values (prom-client hashes labels on every call otherwise). */
export function children<T>(make: (values: readonly string[]) => T): (...values: string[]) => T {
  const cache = new Map<string, T>();
  return (...values) => {
    const key = values.join('\u0000');
    let child = cache.get(key);
    if (child === undefined) {
      child = make(values);
      cache.set(key, child);
    }
    return child;
  };
}

function zip(names: readonly string[], values: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  names.forEach((n, i) => (out[n] = values[i]!));
  return out;
}

/** A labelled counter child, found by its label values in the order of its label names. */
export type CounterOf = (...values: string[]) => Counter.Internal;
/** A labelled histogram child, found by its label values in the order of its label names. */
export type HistogramOf = (...values: string[]) => Histogram.Internal<string>;

/** Makes metrics in one registry, each read through cached label children. */
export interface MetricFactory {
  readonly registers: Registry[];
  counter(name: string, help: string, labelNames: readonly string[]): CounterOf;
  histogram(name: string, help: string, labelNames: readonly string[], buckets: number[]): HistogramOf;
}

export function metricFactory(registry: Registry): MetricFactory {
  const registers = [registry];
  return {
    registers,
    counter(name, help, labelNames) {
      const metric = new Counter({ name, help, labelNames, registers });
      return children((values) => metric.labels(zip(labelNames, values)));
    },
    histogram(name, help, labelNames, buckets) {
      const metric = new Histogram({ name, help, labelNames, buckets, registers });
      return children((values) => metric.labels(zip(labelNames, values)));
    },
  };
}
