import { Counter, Gauge, type Registry } from 'prom-client';
import type { BatchingSample, FrameStreamSample, ServingMetricsOptions } from './metric-sources.js';

/**
 * A counter over totals another part keeps (monotonic per label), read at scrape time and
 * added as deltas.
 */
function totalsCounter(
  registers: Registry[],
  name: string,
  help: string,
  label: string,
  read: () => Iterable<readonly [string, number]>,
): void {
  const seen = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: [label],
    registers,
    collect() {
      for (const [value, total] of read()) {
        const before = seen.get(value) ?? 0;
        if (total > before) this.labels({ [label]: value }).inc(total - before);
        seen.set(value, total);
      }
    },
  });
}

function registerVersionGauges(registers: Registry[], options: ServingMetricsOptions): void {
  new Gauge({
    name: 'visionserve_model_state',
    help: 'Model version state: 1 for the state each known version is in (START, LOADING, AVAILABLE, UNLOADING, END).',
    labelNames: ['model', 'version', 'state'],
    registers,
    collect() {
      if (options.versionStates === undefined) return;
      this.reset();
      for (const s of options.versionStates()) {
        this.labels({ model: s.model, version: String(s.version), state: s.state }).set(1);
      }
    },
  });
  new Gauge({
    name: 'visionserve_queue_depth',
    help: 'Runs waiting for a worker instance, per available model version.',
    labelNames: ['model', 'version'],
    registers,
    collect() {
      if (options.queueDepths === undefined) return;
      this.reset();
      for (const q of options.queueDepths())
        this.labels({ model: q.model, version: String(q.version) }).set(q.queued);
    },
  });
}

function registerAdmissionCollectors(registers: Registry[], options: ServingMetricsOptions): void {
  if (options.inflight !== undefined) {
    const read = options.inflight;
    new Gauge({
      name: 'visionserve_inflight_request_bytes',
      help: 'Request body bytes held by admitted requests (the --max_inflight_request_bytes budget).',
      registers,
      collect() {
        this.set(read().bytes);
      },
    });
  }
  if (options.grpcConnections !== undefined) {
    const read = options.grpcConnections;
    new Gauge({
      name: 'visionserve_grpc_connections',
      help: 'Connections open on the gRPC port.',
      registers,
      collect() {
        this.set(read()?.open ?? 0);
      },
    });
    totalsCounter(
      registers,
      'visionserve_grpc_connections_limited_total',
      'gRPC connections ended by a --grpc_channel_arguments limit (reason: max_age, max_idle, keepalive_timeout).',
      'reason',
      () => read()?.limitCloses ?? [],
    );
  }
  if (options.shed !== undefined) {
    totalsCounter(
      registers,
      'visionserve_shed_requests_total',
      'Requests refused by admission control (reason: inflight-budget, queue-wait or json-decode).',
      'reason',
      options.shed,
    );
  }
}

function registerBatchingCollectors(registers: Registry[], read: () => readonly BatchingSample[]): void {
  const seen = new Map<string, BatchingSample>();
  const perVersion = (name: string, help: string): Counter =>
    new Counter({ name, help, labelNames: ['model', 'version'], registers });
  const batches = perVersion('visionserve_batches_total', 'Batches run by the batching layer.');
  const padding = perVersion(
    'visionserve_batch_padding_rows_total',
    'Padding rows added to reach an allowed batch size.',
  );
  const full = perVersion(
    'visionserve_batch_queue_full_total',
    'Requests refused because the batching queue was full.',
  );
  const wrapped = new Counter({
    name: ':tensorflow:serving:batching_session:wrapped_run_count',
    help: 'Total count of run calls on the wrapped session',
    registers,
  });
  new Gauge({
    name: 'visionserve_batch_queued_tasks',
    help: 'Requests waiting in the batching queues.',
    labelNames: ['model', 'version'],
    registers,
    collect() {
      this.reset();
      for (const b of read()) {
        const labels = { model: b.model, version: String(b.version) };
        const key = `${b.model}\u0000${b.version}`;
        const last = seen.get(key);
        const delta = (now: number, before: number | undefined): number => Math.max(0, now - (before ?? 0));
        batches.labels(labels).inc(delta(b.batches, last?.batches));
        wrapped.inc(delta(b.batches, last?.batches));
        padding.labels(labels).inc(delta(b.paddingRows, last?.paddingRows));
        full.labels(labels).inc(delta(b.rejectedFull, last?.rejectedFull));
        seen.set(key, b);
        this.labels(labels).set(b.queuedTasks);
      }
    },
  });
}

function registerResponseCacheCollectors(
  registers: Registry[],
  read: NonNullable<ServingMetricsOptions['responseCache']>,
): void {
  // Each series reads the cache's counters when scraped (monotonic per model: added as deltas).
  const perModel = (field: 'hits' | 'misses' | 'evictions', help: string): void => {
    const seen = new Map<string, number>();
    new Counter({
      name: `visionserve_response_cache_${field}_total`,
      help,
      labelNames: ['model'],
      registers,
      collect() {
        for (const [model, now] of read()?.models ?? []) {
          const delta = now[field] - (seen.get(model) ?? 0);
          if (delta > 0) this.labels({ model }).inc(delta);
          seen.set(model, now[field]);
        }
      },
    });
  };
  const gauge = (name: string, field: 'bytes' | 'entries' | 'maxBytes', help: string): void => {
    new Gauge({
      name: `visionserve_response_cache_${name}`,
      help,
      registers,
      collect() {
        const sample = read();
        if (sample !== undefined) this.set(sample[field]);
      },
    });
  };
  perModel('hits', 'Predicts answered from the response cache (Triton: nv_cache_num_hits_per_model).');
  perModel('misses', 'Predicts of opted-in models that were not in the response cache and ran.');
  perModel('evictions', 'Response cache entries dropped to stay within --response_cache_bytes.');
  gauge('bytes', 'bytes', 'Bytes held by the response cache (outputs plus a fixed overhead per entry).');
  gauge('entries', 'entries', 'Responses held by the response cache.');
  gauge('max_bytes', 'maxBytes', 'The response cache bound (--response_cache_bytes).');
}

/** The metrics read from other parts when scraped (states, queues, budgets, batching, cache). */
export function registerScrapeCollectors(registers: Registry[], options: ServingMetricsOptions): void {
  registerVersionGauges(registers, options);
  registerAdmissionCollectors(registers, options);
  if (options.batching !== undefined) registerBatchingCollectors(registers, options.batching);
  if (options.responseCache !== undefined) registerResponseCacheCollectors(registers, options.responseCache);
  if (options.listenerConnections !== undefined)
    registerListenerConnections(options.listenerConnections, registers);
  if (options.frameStreams !== undefined) registerFrameStreamCollectors(registers, options.frameStreams);
}

/** `visionserve_frame_streams_open{transport}` and `visionserve_frame_stream_frames_total{model,outcome}`. */
function registerFrameStreamCollectors(
  registers: Registry[],
  read: () => FrameStreamSample | undefined,
): void {
  new Gauge({
    name: 'visionserve_frame_streams_open',
    help: 'Frame streams open now, per transport (websocket, grpc).',
    labelNames: ['transport'],
    registers,
    collect() {
      for (const [transport, open] of read()?.open ?? []) this.labels({ transport }).set(open);
    },
  });
  const seen = new Map<string, number>();
  new Counter({
    name: 'visionserve_frame_stream_frames_total',
    help: 'Frames taken into frame streams, per model, by outcome (answered: a result; dropped: replaced by a newer frame under policy latest; failed: answered with an error or cancelled in flight when its stream closed).',
    labelNames: ['model', 'outcome'],
    registers,
    collect() {
      for (const [model, outcomes] of read()?.frames ?? []) {
        for (const [outcome, total] of Object.entries(outcomes)) {
          const key = `${model}\0${outcome}`;
          const before = seen.get(key) ?? 0;
          if (total > before) this.labels({ model, outcome }).inc(total - before);
          seen.set(key, total);
        }
      }
    },
  });
}

/** `visionserve_connections{listener}` and `visionserve_connections_guarded_total{listener,reason}`. */
function registerListenerConnections(
  read: NonNullable<ServingMetricsOptions['listenerConnections']>,
  registers: Registry[],
): void {
  new Gauge({
    name: 'visionserve_connections',
    help: 'Connections open on each listener (rest, sagemaker, grpc).',
    labelNames: ['listener'],
    registers,
    collect() {
      for (const { listener, open } of read()) this.labels({ listener }).set(open);
    },
  });
  const seen = new Map<string, number>();
  new Counter({
    name: 'visionserve_connections_guarded_total',
    help: 'Connections closed or refused by a connection limit (reason: first_bytes_timeout, evicted_idle, refused_at_cap, refused_per_address).',
    labelNames: ['listener', 'reason'],
    registers,
    collect() {
      for (const { listener, guardCloses } of read()) {
        for (const [reason, total] of guardCloses) {
          const key = `${listener}\0${reason}`;
          const before = seen.get(key) ?? 0;
          if (total > before) this.labels({ listener, reason }).inc(total - before);
          seen.set(key, total);
        }
      }
    },
  });
}
