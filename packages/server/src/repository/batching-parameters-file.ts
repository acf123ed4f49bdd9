import { parsePbtxt } from '@visionserve/protocol/pbtxt';
import {
  type PbMessageReader,
  fieldBool,
  fieldInt,
  fieldString,
  readMessage,
} from '@visionserve/protocol/pbtxt';
import type { PbField } from '@visionserve/protocol/pbtxt';

export interface ParseBatchingParametersOptions {
  /** Name used in error messages (e.g. the file name). Default "batching parameters". */
  readonly source?: string;
}

/** Text-format field name -> key and scalar kind (all are protobuf wrapper messages except two). */
const WRAPPED = {
  max_batch_size: ['maxBatchSize', 'int'],
  batch_timeout_micros: ['batchTimeoutMicros', 'int'],
  max_enqueued_batches: ['maxEnqueuedBatches', 'int'],
  num_batch_threads: ['numBatchThreads', 'int'],
  thread_pool_name: ['threadPoolName', 'string'],
  enable_large_batch_splitting: ['enableLargeBatchSplitting', 'bool'],
  max_execution_batch_size: ['maxExecutionBatchSize', 'int'],
} as const;

function scalar(field: PbField, kind: 'int' | 'string' | 'bool', source: string): number | string | boolean {
  switch (kind) {
    case 'int':
      return fieldInt(field, source);
    case 'string':
      return fieldString(field, source);
    case 'bool':
      return fieldBool(field, source);
  }
}

/** A wrapper message `{ value: x }` (an empty `{}` is the default value), or a bare scalar. */
function wrapped(
  reader: PbMessageReader,
  name: string,
  kind: 'int' | 'string' | 'bool',
  source: string,
): number | string | boolean | undefined {
  const field = reader.one(name);
  if (field === undefined) return undefined;
  if (field.value.kind !== 'message') return scalar(field, kind, source);
  const inner = readMessage(field.value, source);
  inner.checkKnown(['value'], name);
  const value = inner.one('value');
  if (value === undefined) return kind === 'int' ? 0 : kind === 'string' ? '' : false;
  return scalar(value, kind, source);
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
  const source = options.source ?? 'batching parameters';
  const root = readMessage(parsePbtxt(text, { source }), source);
  root.checkKnown(
    [...Object.keys(WRAPPED), 'allowed_batch_sizes', 'pad_variable_length_inputs'],
    'BatchingParameters',
  );
  const out: Record<string, unknown> = {};
  for (const [name, [key, kind]] of Object.entries(WRAPPED)) {
    const value = wrapped(root, name, kind, source);
    if (value !== undefined) out[key] = value;
  }
  const allowed = root.all('allowed_batch_sizes');
  if (allowed.length > 0) out['allowedBatchSizes'] = allowed.map((f) => fieldInt(f, source));
  const pad = root.bool('pad_variable_length_inputs');
  if (pad !== undefined) out['padVariableLengthInputs'] = pad;
  return out;
}
