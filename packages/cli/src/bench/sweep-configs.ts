/**
 * Server layouts of the throughput sweep: `<instances>x<intra-op threads>`, optionally
 * `+b<timeout>` for dynamic batching (max batch 8, a batch thread per instance,
 * `batch_timeout_micros` from the timeout: `b0`, `b500us`, `b1ms`), and `+spin` for
 * onnxruntime threads that spin (`--ort_allow_spinning`).
 */

export interface SweepBatching {
  readonly maxBatchSize: number;
  readonly timeoutMicros: number;
  readonly batchThreads: number;
}

export interface SweepConfig {
  /** As written on the command line and in the report, e.g. `2x1+b1ms`. */
  readonly name: string;
  /** --model_instances. */
  readonly instances: number;
  /** --tensorflow_intra_op_parallelism. */
  readonly intraOpThreads: number;
  /** Undefined: batching off. */
  readonly batching: SweepBatching | undefined;
  /** --ort_allow_spinning; written only when true. */
  readonly spin?: true;
}

/** The README's layouts: on 2 cores, instances vs threads, with and without batching. */
export const DEFAULT_SWEEP_CONFIGS: readonly string[] = ['1x1', '2x1', '1x2', '2x1+b0', '1x2+b0', '2x1+b1ms'];
export const DEFAULT_SWEEP_CONCURRENCY: readonly number[] = [1, 4, 16, 64];

const PATTERN = /^(\d+)x(\d+)(?:\+b(\d+)(us|ms)?)?(\+spin)?$/;

/** Parses one layout name; throws an Error naming the expected form when it does not match. */
export function parseSweepConfig(name: string): SweepConfig {
  const m = PATTERN.exec(name.trim());
  const instances = m ? Number(m[1]) : NaN;
  const intraOpThreads = m ? Number(m[2]) : NaN;
  if (!m || !(instances >= 1 && instances <= 64) || !(intraOpThreads >= 1 && intraOpThreads <= 64)) {
    throw new Error(
      `sweep configuration "${name}" must look like <instances>x<threads>[+b<timeout>[us|ms]][+spin], e.g. 2x1, 2x1+b1ms or 1x2+spin (1-64 each)`,
    );
  }
  const batching =
    m[3] === undefined
      ? undefined
      : {
          maxBatchSize: 8,
          timeoutMicros: Number(m[3]) * (m[4] === 'ms' ? 1000 : 1),
          batchThreads: instances,
        };
  return {
    name: name.trim(),
    instances,
    intraOpThreads,
    batching,
    ...(m[5] === undefined ? {} : { spin: true as const }),
  };
}

/** TF Serving's batching parameters file (text format) for a layout. */
export function batchingParametersText(b: SweepBatching): string {
  return (
    `max_batch_size { value: ${b.maxBatchSize} }\n` +
    `batch_timeout_micros { value: ${b.timeoutMicros} }\n` +
    `max_enqueued_batches { value: 1000 }\n` +
    `num_batch_threads { value: ${b.batchThreads} }\n`
  );
}

/** The `visionserve serve` flags of a layout (the batching file is written by the caller). */
export function sweepServerFlags(c: SweepConfig, batchingFile: string | undefined): string[] {
  const flags = [`--model_instances=${c.instances}`, `--tensorflow_intra_op_parallelism=${c.intraOpThreads}`];
  if (c.batching) {
    if (batchingFile === undefined) throw new Error(`sweep configuration ${c.name} needs a batching file`);
    flags.push('--enable_batching', `--batching_parameters_file=${batchingFile}`);
  }
  if (c.spin === true) flags.push('--ort_allow_spinning=true');
  return flags;
}

/** Human description for the report, e.g. "2 × 1 + batching (max 8, timeout 1 ms)". */
export function describeSweepConfig(c: SweepConfig): string {
  const base = `${c.instances} × ${c.intraOpThreads}${c.spin === true ? ' spinning' : ''}`;
  if (!c.batching) return base;
  const t = c.batching.timeoutMicros;
  const timeout = t === 0 ? '0' : t % 1000 === 0 ? `${t / 1000} ms` : `${t} µs`;
  return `${base} + batching (max ${c.batching.maxBatchSize}, timeout ${timeout})`;
}
