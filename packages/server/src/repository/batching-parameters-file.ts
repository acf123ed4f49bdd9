import { parseTextMessage } from '@visionserve/protocol/pbtxt';
import { BatchingParametersSchema } from '@visionserve/protocol/tfs-proto';

export interface ParseBatchingParametersOptions {
  /** Name used in error messages (e.g. the file name). Default "batching parameters". */
  readonly source?: string;
}

/**
 * Parses TF Serving's `BatchingParameters` text format (`--batching_parameters_file`
 * and per-model `batching_params.pbtxt`):
 *
 *     max_batch_size { value: 32 }  batch_timeout_micros { value: 1000 }
 *     max_enqueued_batches { value: 8 }  num_batch_threads { value: 2 }
 *     allowed_batch_sizes: 8  allowed_batch_sizes: 32  pad_variable_length_inputs: true
 *     enable_large_batch_splitting { value: true }  max_execution_batch_size { value: 16 }
 *
 * Wrapper fields also accept a bare scalar (`max_batch_size: 32`). Only the
 * fields present are returned; resolveBatchingParameters applies defaults and
 * validates. Throws INVALID_ARGUMENT with line:column for syntax errors,
 * unknown fields and type mismatches.
 */
/**
 * The fields of a TF Serving BatchingParameters file, each present only when the file
 * sets it (the batching layer's BatchingParametersInput has this shape: the repository
 * owns the file format, the batching layer the meaning and the defaults).
 */
export interface BatchingParametersFileFields {
  maxBatchSize?: number;
  batchTimeoutMicros?: number;
  maxEnqueuedBatches?: number;
  numBatchThreads?: number;
  threadPoolName?: string;
  allowedBatchSizes?: readonly number[];
  padVariableLengthInputs?: boolean;
  enableLargeBatchSplitting?: boolean;
  maxExecutionBatchSize?: number;
}

export function parseBatchingParameters(
  text: string,
  options: ParseBatchingParametersOptions = {},
): BatchingParametersFileFields {
  const parsed = parseTextMessage(BatchingParametersSchema, text, {
    source: options.source ?? 'batching parameters',
  });
  const m = parsed.message;
  const int = (value: bigint, field: string): number => {
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw parsed.error(`field "${field}": ${value.toString()} is too large`, m, field);
    }
    return Number(value);
  };
  const out: BatchingParametersFileFields = {};
  if (m.maxBatchSize !== undefined) out.maxBatchSize = int(m.maxBatchSize, 'max_batch_size');
  if (m.batchTimeoutMicros !== undefined)
    out.batchTimeoutMicros = int(m.batchTimeoutMicros, 'batch_timeout_micros');
  if (m.maxEnqueuedBatches !== undefined)
    out.maxEnqueuedBatches = int(m.maxEnqueuedBatches, 'max_enqueued_batches');
  if (m.numBatchThreads !== undefined) out.numBatchThreads = int(m.numBatchThreads, 'num_batch_threads');
  if (m.threadPoolName !== undefined) out.threadPoolName = m.threadPoolName;
  if (m.allowedBatchSizes.length > 0)
    out.allowedBatchSizes = m.allowedBatchSizes.map((v) => int(v, 'allowed_batch_sizes'));
  if (parsed.written(m, 'pad_variable_length_inputs'))
    out.padVariableLengthInputs = m.padVariableLengthInputs;
  if (m.enableLargeBatchSplitting !== undefined) out.enableLargeBatchSplitting = m.enableLargeBatchSplitting;
  if (m.maxExecutionBatchSize !== undefined)
    out.maxExecutionBatchSize = int(m.maxExecutionBatchSize, 'max_execution_batch_size');
  return out;
}
