/**
 * Live traffic numbers for the console, read from the same counters as the Prometheus
 * metrics. Implemented by observability; the console frontend only sees this interface.
 * Nothing is computed unless a stream is open.
 */

/** Median and 99th percentile of a latency over the last interval, in ms (null: no samples). */
export interface LatencyQuantiles {
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
}

/** One model on one API over the last interval. */
export interface TrafficSeries {
  readonly model: string;
  readonly api: string;
  /** Requests answered per second. */
  readonly rps: number;
  /** Requests answered with an error per second. */
  readonly errorRps: number;
  readonly latency: LatencyQuantiles;
  /** Where predict requests spent their time (decode, queue, inference, encode). */
  readonly phases: Readonly<Record<'decode' | 'queue' | 'inference' | 'encode', LatencyQuantiles>>;
}

/** One model (all APIs) over the last interval. */
export interface ModelTraffic {
  readonly model: string;
  /** Runs waiting for a worker instance now (all versions). */
  readonly queueDepth: number;
  /** Mean rows of the executed batches requests ran in (1 without batching); null: no runs. */
  readonly batchSizeMean: number | null;
}

export interface TrafficSample {
  /** Epoch ms of the sample. */
  readonly t: number;
  /** Seconds the rates and quantiles cover. */
  readonly intervalS: number;
  readonly series: readonly TrafficSeries[];
  readonly models: readonly ModelTraffic[];
  /** Requests shed by the in-flight budget per second. */
  readonly shedPerS: number;
  /** Worker threads that died and were replaced, since start. */
  readonly workerRestarts: number;
}

/** A stream of samples; the first `next` sets the baseline (its rates cover no interval yet). */
export interface TrafficStream {
  next(): Promise<TrafficSample>;
}

export interface TrafficSource {
  /** Opens a stream (cheap; holds only the previous counters). */
  open(): TrafficStream;
}
