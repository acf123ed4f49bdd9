import { type Tensor, invalidArgument } from '@visionserve/protocol';
import type { CallOptions } from './call-options.js';
import type { ModelRef } from './model-ref.js';
import type { Predictor } from './results.js';
import { concatTensors, splitTensor } from './tensors.js';

export interface PredictBatchedOptions extends CallOptions {
  /** Most rows (summed dimension 0 of the items) per request. Default 32. */
  readonly maxBatchSize?: number;
  /** Requests in flight at once. Default 1. */
  readonly concurrency?: number;
}

/**
 * Client-side batching: sends many inputs in few requests. Items are grouped in order
 * until a group would exceed `maxBatchSize` rows; each group's tensors are stacked along
 * dimension 0 per input alias, and every output is split back by the items' row counts.
 *
 * Every item must have the same input aliases, and the model must batch along dimension
 * 0 (outputs whose dimension 0 is not the group's row count are INVALID_ARGUMENT).
 * `timeoutMs` applies to each request. Results are in item order.
 */
export async function predictBatched(
  predictor: Predictor,
  model: ModelRef,
  items: readonly Readonly<Record<string, Tensor>>[],
  options: PredictBatchedOptions = {},
): Promise<Record<string, Tensor>[]> {
  const maxBatch = options.maxBatchSize ?? 32;
  const concurrency = options.concurrency ?? 1;
  if (!(maxBatch >= 1) || !(concurrency >= 1)) {
    throw invalidArgument('predictBatched: maxBatchSize and concurrency must be >= 1');
  }
  const first = items[0];
  if (first === undefined) return [];
  const aliases = Object.keys(first);
  const rowsOf = (item: Readonly<Record<string, Tensor>>, index: number): number => {
    const keys = Object.keys(item);
    if (keys.length !== aliases.length || !aliases.every((a) => Object.hasOwn(item, a))) {
      throw invalidArgument(
        `predictBatched: item ${index} has inputs {${keys.join(',')}}, expected {${aliases.join(',')}}`,
      );
    }
    const rows = item[aliases[0]!]!.shape[0];
    if (rows === undefined) throw invalidArgument(`predictBatched: item ${index}: inputs need a dimension 0`);
    for (const alias of aliases) {
      if (item[alias]!.shape[0] !== rows) {
        throw invalidArgument(`predictBatched: item ${index}: every input needs the same dimension 0`);
      }
    }
    return rows;
  };
  const groups: { start: number; sizes: number[] }[] = [];
  let current: { start: number; sizes: number[] } | undefined;
  let currentRows = 0;
  items.forEach((item, i) => {
    const rows = rowsOf(item, i);
    if (current === undefined || currentRows + rows > maxBatch) {
      current = { start: i, sizes: [] };
      groups.push(current);
      currentRows = 0;
    }
    current.sizes.push(rows);
    currentRows += rows;
  });

  const results = new Array<Record<string, Tensor>>(items.length);
  const runGroup = async (group: { start: number; sizes: number[] }): Promise<void> => {
    const members = items.slice(group.start, group.start + group.sizes.length);
    const inputs: Record<string, Tensor> = {};
    for (const alias of aliases) inputs[alias] = concatTensors(members.map((m) => m[alias]!));
    const { outputs } = await predictor.predict(model, inputs, options);
    const total = group.sizes.reduce((a, b) => a + b, 0);
    const split: Record<string, Tensor[]> = {};
    for (const [alias, t] of Object.entries(outputs)) {
      if (t.shape[0] !== total) {
        throw invalidArgument(
          `predictBatched: output "${alias}" has dimension 0 = ${t.shape[0] ?? 'none'}, expected ${total}: the model does not batch along dimension 0`,
        );
      }
      split[alias] = splitTensor(t, group.sizes);
    }
    group.sizes.forEach((_, j) => {
      results[group.start + j] = Object.fromEntries(
        Object.entries(split).map(([a, parts]) => [a, parts[j]!]),
      );
    });
  };
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, groups.length) }, async () => {
    while (next < groups.length) await runGroup(groups[next++]!);
  });
  await Promise.all(lanes);
  return results;
}
