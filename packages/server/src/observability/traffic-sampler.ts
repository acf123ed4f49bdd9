import type {
  LatencyQuantiles,
  ModelTraffic,
  TrafficSample,
  TrafficSeries,
  TrafficSource,
  TrafficStream,
} from '../frontends/shared/traffic-source.js';
import type { MetricValues } from './serving-metrics.js';

export interface TrafficSamplerOptions {
  /** The metrics' current values (ServingMetrics.values). */
  readonly read: () => Promise<MetricValues[]>;
  /** Clock in epoch ms. Default Date.now. */
  readonly now?: (() => number) | undefined;
}

/** Cumulative buckets of one histogram series: upper bound -> count, plus the total. */
interface Histogram {
  readonly buckets: Map<number, number>;
  count: number;
}

/** Cumulative counters read at one instant, keyed by label tuples. */
interface Counters {
  readonly at: number;
  readonly requests: Map<string, Histogram>;
  readonly errors: Map<string, number>;
  readonly phases: Map<string, Histogram>;
  readonly batchSum: Map<string, number>;
  readonly batchCount: Map<string, number>;
  readonly queue: Map<string, number>;
  shed: number;
  restarts: number;
}

const SEP = '\u0000';
type Phase = 'decode' | 'queue' | 'inference' | 'encode';

function histogramOf(map: Map<string, Histogram>, key: string): Histogram {
  let h = map.get(key);
  if (h === undefined) {
    h = { buckets: new Map(), count: 0 };
    map.set(key, h);
  }
  return h;
}

const add = (map: Map<string, number>, key: string, value: number): void => {
  map.set(key, (map.get(key) ?? 0) + value);
};

function read(metrics: readonly MetricValues[], at: number): Counters {
  const c: Counters = {
    at,
    requests: new Map(),
    errors: new Map(),
    phases: new Map(),
    batchSum: new Map(),
    batchCount: new Map(),
    queue: new Map(),
    shed: 0,
    restarts: 0,
  };
  for (const metric of metrics) {
    for (const v of metric.values) {
      const l = v.labels;
      const model = String(l['model'] ?? '');
      switch (metric.name) {
        case 'visionserve_request_duration_seconds': {
          if (model === '') break;
          const key = `${model}${SEP}${String(l['api'])}`;
          if (v.metricName?.endsWith('_bucket') === true) {
            // Labelled by status too: sum the statuses' buckets.
            const h = histogramOf(c.requests, key);
            const le = l['le'] === '+Inf' ? Infinity : Number(l['le']);
            h.buckets.set(le, (h.buckets.get(le) ?? 0) + v.value);
          } else if (v.metricName?.endsWith('_count') === true) {
            histogramOf(c.requests, key).count += v.value;
            const status = String(l['status']);
            if (status !== '200' && status !== 'OK') add(c.errors, key, v.value);
          }
          break;
        }
        case 'visionserve_request_phase_seconds': {
          if (model === '') break;
          const key = `${model}${SEP}${String(l['api'])}${SEP}${String(l['phase'])}`;
          const h = histogramOf(c.phases, key);
          if (v.metricName?.endsWith('_bucket') === true) {
            const le = l['le'] === '+Inf' ? Infinity : Number(l['le']);
            h.buckets.set(le, (h.buckets.get(le) ?? 0) + v.value);
          } else if (v.metricName?.endsWith('_count') === true) h.count += v.value;
          break;
        }
        case 'visionserve_batch_size':
          if (v.metricName?.endsWith('_sum') === true) add(c.batchSum, model, v.value);
          else if (v.metricName?.endsWith('_count') === true) add(c.batchCount, model, v.value);
          break;
        case 'visionserve_queue_depth':
          add(c.queue, model, v.value);
          break;
        case 'visionserve_shed_requests_total':
          c.shed += v.value;
          break;
        case 'visionserve_worker_restarts_total':
          c.restarts += v.value;
          break;
        default:
          break;
      }
    }
  }
  return c;
}

/** A quantile of the observations between two cumulative histograms, interpolated within its bucket (ms). */
export function quantileMs(
  now: Histogram | undefined,
  before: Histogram | undefined,
  q: number,
): number | null {
  if (now === undefined) return null;
  const bounds = [...now.buckets.keys()].sort((a, b) => a - b);
  const delta = bounds.map((le) => now.buckets.get(le)! - (before?.buckets.get(le) ?? 0));
  const total = delta.at(-1) ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lower = 0;
  for (let i = 0; i < bounds.length; i++) {
    if (delta[i]! >= rank) {
      const upper = bounds[i]!;
      if (!Number.isFinite(upper)) return lower * 1000;
      const below = i === 0 ? 0 : delta[i - 1]!;
      const inBucket = delta[i]! - below;
      const share = inBucket <= 0 ? 1 : (rank - below) / inBucket;
      return (lower + (upper - lower) * share) * 1000;
    }
    lower = Number.isFinite(bounds[i]!) ? bounds[i]! : lower;
  }
  return lower * 1000;
}

const quantiles = (now: Histogram | undefined, before: Histogram | undefined): LatencyQuantiles => ({
  p50Ms: quantileMs(now, before, 0.5),
  p99Ms: quantileMs(now, before, 0.99),
});

/**
 * Console traffic from the Prometheus metrics: each stream keeps the previous counters and
 * reports rates and quantiles over the interval since. Reads the registry only when asked.
 */
export function createTrafficSampler(options: TrafficSamplerOptions): TrafficSource {
  const now = options.now ?? Date.now;
  return {
    open(): TrafficStream {
      let previous: Counters | undefined;
      return {
        async next(): Promise<TrafficSample> {
          const current = read(await options.read(), now());
          const before = previous;
          previous = current;
          const intervalS = before === undefined ? 0 : Math.max(1e-3, (current.at - before.at) / 1000);
          const rate = (a: number, b: number | undefined): number =>
            intervalS === 0 ? 0 : Math.max(0, a - (b ?? 0)) / intervalS;
          const series: TrafficSeries[] = [];
          for (const [key, h] of current.requests) {
            const [model, api] = key.split(SEP) as [string, string];
            const old = before?.requests.get(key);
            const phase = (p: Phase): LatencyQuantiles => {
              const k = `${key}${SEP}${p}`;
              return quantiles(current.phases.get(k), before?.phases.get(k));
            };
            series.push({
              model,
              api,
              rps: rate(h.count, old?.count),
              errorRps: rate(current.errors.get(key) ?? 0, before?.errors.get(key)),
              latency: before === undefined ? { p50Ms: null, p99Ms: null } : quantiles(h, old),
              phases: {
                decode: before === undefined ? { p50Ms: null, p99Ms: null } : phase('decode'),
                queue: before === undefined ? { p50Ms: null, p99Ms: null } : phase('queue'),
                inference: before === undefined ? { p50Ms: null, p99Ms: null } : phase('inference'),
                encode: before === undefined ? { p50Ms: null, p99Ms: null } : phase('encode'),
              },
            });
          }
          const modelNames = new Set([
            ...current.queue.keys(),
            ...current.batchCount.keys(),
            ...series.map((s) => s.model),
          ]);
          const models: ModelTraffic[] = [...modelNames]
            .filter((m) => m !== '')
            .sort()
            .map((model) => {
              const runs = (current.batchCount.get(model) ?? 0) - (before?.batchCount.get(model) ?? 0);
              const rows = (current.batchSum.get(model) ?? 0) - (before?.batchSum.get(model) ?? 0);
              return {
                model,
                queueDepth: current.queue.get(model) ?? 0,
                batchSizeMean: before === undefined || runs <= 0 ? null : rows / runs,
              };
            });
          return {
            t: current.at,
            intervalS,
            series: series.sort((a, b) => (a.model + a.api).localeCompare(b.model + b.api)),
            models,
            shedPerS: rate(current.shed, before?.shed ?? current.shed),
            workerRestarts: current.restarts,
          };
        },
      };
    },
  };
}
