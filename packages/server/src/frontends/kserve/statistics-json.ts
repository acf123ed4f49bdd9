/** The statistics extension's JSON (Triton's ModelStatistics, every key present). */
import type { StatisticDuration, VersionStatistics } from '../../core/inference-statistics.js';

const duration = (d: StatisticDuration): { count: number; ns: number } => ({ count: d.count, ns: d.ns });

/**
 * One `model_stats` entry. perf_analyzer reads every `inference_stats` key, so all are
 * present; the cache is not implemented (its counters stay 0).
 */
export function modelStatisticsJson(
  name: string,
  version: number,
  s: VersionStatistics,
): Record<string, unknown> {
  const zero = { count: 0, ns: 0 };
  return {
    name,
    version: String(version),
    last_inference: s.lastInferenceMs,
    inference_count: s.inferenceCount,
    execution_count: s.executionCount,
    inference_stats: {
      success: duration(s.success),
      fail: duration(s.fail),
      queue: duration(s.queue),
      compute_input: duration(s.computeInput),
      compute_infer: duration(s.computeInfer),
      compute_output: duration(s.computeOutput),
      cache_hit: zero,
      cache_miss: zero,
    },
    response_stats: {},
    batch_stats: s.batches.map((b) => ({
      batch_size: b.batchSize,
      compute_input: duration(b.computeInput),
      compute_infer: duration(b.computeInfer),
      compute_output: duration(b.computeOutput),
    })),
    memory_usage: [],
  };
}
