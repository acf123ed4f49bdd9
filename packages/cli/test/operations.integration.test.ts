/**
 * Operating the server: Prometheus metrics (TF Serving's path and names, visionserve_*),
 * health probes, the management guard, request logs replayed as warmup, OTLP tracing and
 * CORS, on a real server over real sockets.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { copyFile, mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { createKServeGrpcClient } from '@visionserve/client';
import { Code, ServingError } from '@visionserve/protocol';
import { ReloadConfigRequestSchema } from '@visionserve/protocol/tfs-proto';
import {
  createJsonLogger,
  resolveServerConfig,
  startVisionServer,
  type WarmupReport,
} from '@visionserve/server';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { sharedModel } from './helpers/shared.js';
import { grpcPredict, postJson, startHarness, type Harness } from './helpers/server-harness.js';

const x = (values: number[]) => ({
  x: { dtype: 'float32' as const, shape: [values.length], data: Float32Array.from(values) },
});

type Families = ReturnType<typeof parsePrometheusTextFormat>;

/**
 * Scrapes and parses the page with a Prometheus text-format parser. The page is parsed as
 * it is (format check, metric types); samples are read from a second parse in which every
 * family is untyped, because the parser folds labelled histogram series into one sample:
 * there, `x_count{...}` and `x_bucket{...,le=...}` are families of their own.
 */
async function scrape(base: string, path = '/monitoring/prometheus/metrics'): Promise<Families> {
  const res = await fetch(`${base}${path}`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  const text = await res.text();
  const typed = parsePrometheusTextFormat(text);
  assert.ok(typed.some((f) => f.type === 'HISTOGRAM') && typed.some((f) => f.type === 'COUNTER'));
  return parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) \w+$/gm, '# TYPE $1 untyped'));
}

/** The summed value of the samples of `name` whose labels include `labels` (histograms: use `_count`); 0 when absent. */
function sample(families: Families, name: string, labels: Record<string, string>): number {
  // Untyped, a histogram's series interleave: `x_count` appears once per label set.
  let matching = families.filter((f) => f.name === name && f.metrics.length > 0);
  if (matching.length === 0) matching = families.filter((f) => f.name === `${name}_count`);
  let total = 0;
  for (const family of matching) {
    for (const m of family.metrics) {
      const l = m.labels ?? {};
      if (Object.entries(labels).every(([k, v]) => l[k] === v)) total += Number(m.value ?? 0);
    }
  }
  return total;
}

function labelValues(families: Families, label: string): Set<string> {
  const out = new Set<string>();
  for (const f of families)
    for (const m of f.metrics) if (m.labels?.[label] !== undefined) out.add(m.labels[label]);
  return out;
}

async function writeMonitoring(dir: string): Promise<string> {
  const file = join(dir, 'monitoring.config');
  await writeFile(file, 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n');
  return file;
}

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('Prometheus metrics', () => {
  let h: Harness;
  let root: string;
  before(async () => {
    root = await tempRepo('vs-ops-metrics-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      sagemakerPort: 0,
      monitoringConfigFile: await writeMonitoring(root),
    });
  });
  after(() => h.close());

  it('counts N predicts on each API with the right labels, and TF Serving names', async () => {
    const N = 5;
    const before = await scrape(h.rest);
    for (let i = 0; i < N; i++) {
      await grpcPredict(h.grpc, 'half', x([i]));
      assert.equal((await postJson(`${h.rest}/v1/models/half:predict`, { instances: [i] })).status, 200);
      assert.equal((await postJson(`${h.sagemaker}/invocations`, { instances: [i] })).status, 200);
    }
    const after = await scrape(h.rest);
    const moved = (name: string, labels: Record<string, string>): number =>
      sample(after, name, labels) - sample(before, name, labels);
    const model = { model: 'half', version: '1' };
    assert.equal(
      moved('visionserve_requests_total', { api: 'tfs-grpc', method: 'Predict', status: 'OK', ...model }),
      N,
    );
    assert.equal(
      moved('visionserve_requests_total', { api: 'tfs-rest', method: 'Predict', status: '200', ...model }),
      N,
    );
    assert.equal(
      moved('visionserve_requests_total', {
        api: 'sagemaker',
        method: 'invocations',
        status: '200',
        ...model,
      }),
      N,
    );
    for (const api of ['tfs-grpc', 'tfs-rest', 'sagemaker']) {
      assert.equal(moved('visionserve_request_duration_seconds', { api, ...model }), N, api);
      for (const phase of ['decode', 'queue', 'inference', 'encode']) {
        assert.equal(
          moved('visionserve_request_phase_seconds', { api, phase, ...model }),
          N,
          `${api} ${phase}`,
        );
      }
    }
    assert.equal(moved(':tensorflow:serving:request_count', { model_name: 'half', status: 'OK' }), 3 * N);
    assert.equal(moved(':tensorflow:serving:request_latency', { model_name: 'half', entrypoint: 'GRPC' }), N);
    assert.equal(
      moved(':tensorflow:serving:request_latency', { model_name: 'half', entrypoint: 'REST' }),
      2 * N,
    );
    assert.equal(
      moved(':tensorflow:serving:runtime_latency', { model_name: 'half', runtime: 'ONNX' }),
      3 * N,
    );
    assert.equal(
      moved('visionserve_predicts_total', { ...model, signature: 'serving_default', code: 'OK' }),
      3 * N,
    );
    assert.equal(moved('visionserve_batch_size', model), 3 * N);
    assert.equal(sample(after, 'visionserve_model_state', { ...model, state: 'AVAILABLE' }), 1);
    assert.ok(sample(after, 'visionserve_model_load_seconds', { model: 'half', outcome: 'ok' }) >= 1);
    assert.ok(sample(after, ':tensorflow:cc:saved_model:load_attempt_count', { status: 'success' }) >= 1);
    assert.ok(sample(after, 'visionserve_warmup_runs_total', { model: 'half', kind: 'built-in' }) >= 1);
    assert.ok(after.some((f) => f.name === 'visionserve_nodejs_eventloop_lag_seconds'));
    assert.ok(after.some((f) => f.name === 'visionserve_process_resident_memory_bytes'));
    // Served on the SageMaker listener too.
    assert.ok(
      sample(await scrape(h.sagemaker), 'visionserve_requests_total', { api: 'sagemaker', ...model }) >= N,
    );
  });

  it('unknown model names add no series', async () => {
    for (let i = 0; i < 3; i++) {
      await assert.rejects(
        grpcPredict(h.grpc, `nosuch${i}`, x([1])),
        (e: ServingError) => e.code === Code.NOT_FOUND,
      );
      assert.equal(
        (await postJson(`${h.rest}/v1/models/nosuch-rest${i}:predict`, { instances: [1] })).status,
        404,
      );
    }
    const families = await scrape(h.rest);
    for (const label of ['model', 'model_name']) {
      for (const value of labelValues(families, label))
        assert.ok(!value.startsWith('nosuch'), `${label}=${value}`);
    }
    assert.ok(
      sample(families, 'visionserve_requests_total', { api: 'tfs-grpc', status: 'NOT_FOUND', model: '' }) >=
        3,
    );
    assert.ok(
      sample(families, 'visionserve_requests_total', { api: 'tfs-rest', status: '404', model: '' }) >= 3,
    );
  });
});

describe('admission and gRPC connection metrics', () => {
  let h: Harness;
  let root: string;
  before(async () => {
    root = await tempRepo('vs-ops-shed-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      monitoringConfigFile: await writeMonitoring(root),
      // Bodies above 4 KiB are refused by the in-flight budget; idle gRPC connections close after 300 ms.
      maxInflightRequestBytes: 4096,
      grpcChannelArguments: ['grpc.max_connection_idle_ms=300'],
    });
  });
  after(() => h.close());

  it('counts refusals by reason, open gRPC connections and those a limit ended', async () => {
    const big = await postJson(`${h.rest}/v1/models/half:predict`, {
      instances: Array.from({ length: 2000 }, (_, i) => i),
    });
    assert.notEqual(big.status, 200);
    await grpcPredict(h.grpc, 'half', x([1]));
    const during = await scrape(h.rest);
    assert.ok(sample(during, 'visionserve_shed_requests_total', { reason: 'inflight-budget' }) >= 1);
    assert.equal(sample(during, 'visionserve_grpc_connections', {}), 1);
    // Idle for longer than the limit: GOAWAY, the connection closes and is counted.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const idle = await scrape(h.rest);
    assert.equal(sample(idle, 'visionserve_grpc_connections', {}), 0);
    assert.ok(sample(idle, 'visionserve_grpc_connections_limited_total', { reason: 'max_idle' }) >= 1);
    // The client reconnects on its next call.
    const again = await grpcPredict(h.grpc, 'half', x([2]));
    assert.deepEqual(Array.from(again.outputs['y']?.data as Float32Array), [3]);
  });
});

describe('batching metrics', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo('vs-ops-batching-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    const params = join(root, 'batching.config');
    await writeFile(
      params,
      'max_batch_size { value: 8 } batch_timeout_micros { value: 20000 } num_batch_threads { value: 1 }',
    );
    h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      enableBatching: true,
      batchingParametersFile: params,
      monitoringConfigFile: await writeMonitoring(root),
    });
  });
  after(() => h.close());

  it('batch size, queuing latency and batch counters move', async () => {
    const before = await scrape(h.rest);
    const N = 8;
    await Promise.all(Array.from({ length: N }, (_, i) => grpcPredict(h.grpc, 'half', x([i]))));
    const after = await scrape(h.rest);
    const moved = (name: string, labels: Record<string, string>): number =>
      sample(after, name, labels) - sample(before, name, labels);
    assert.equal(moved('visionserve_batch_size', { model: 'half', version: '1' }), N);
    assert.equal(moved(':tensorflow:serving:batching_session:queuing_latency', {}), N);
    assert.equal(
      moved(':tensorflow:serving:batching_session:processed_batch_size', { model_name: 'half' }),
      N,
    );
    const batches = moved('visionserve_batches_total', { model: 'half', version: '1' });
    assert.ok(batches >= 1 && batches < N, `batches ${batches}`);
    assert.equal(moved(':tensorflow:serving:batching_session:wrapped_run_count', {}), batches);
    // Requests merged: the executed batch sizes add up to more than one row per request.
    const sum = moved('visionserve_batch_size_sum', { model: 'half', version: '1' });
    assert.ok(sum > N, `some requests ran in batches larger than 1 (sum ${sum})`);
  });
});

describe('health probes', () => {
  it('with --open_ports_before_models_load: readiness is false while a model loads and while draining, true when AVAILABLE', async () => {
    const root = await tempRepo('vs-ops-probes-');
    // A real model: its load and warmup take long enough to be seen.
    const base = await placeModel(root, 'half', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    const rest = await freePort();
    const config = resolveServerConfig({
      host: '127.0.0.1',
      grpcPort: 0,
      restPort: rest,
      sagemakerPort: -1,
      modelName: 'half',
      modelBasePath: base,
      logLevel: 'silent',
      shutdownReadinessDelayMs: 600,
      // The old order: listeners first, so that the probes answer during the load.
      openPortsBeforeModelsLoad: true,
    });
    const url = `http://127.0.0.1:${rest}`;
    let started = false;
    const starting = startVisionServer(config, createJsonLogger({ level: 'silent' })).finally(() => {
      started = true;
    });
    const seen: { status: number; body: string }[] = [];
    while (!started) {
      try {
        const res = await fetch(`${url}/readyz`);
        if (!started) seen.push({ status: res.status, body: await res.text() });
        else await res.text();
      } catch {
        // Not listening yet.
      }
    }
    const server = await starting;
    assert.ok(seen.length > 0, 'the listener answered before the model loaded');
    assert.deepEqual(
      new Set(seen.map((r) => r.status)),
      new Set([503]),
      'not ready before the model is AVAILABLE',
    );
    assert.ok(
      seen.some((r) => /"model":"half","state":"(START|LOADING)"/.test(r.body)),
      seen.at(-1)!.body,
    );
    assert.equal((await fetch(`${url}/readyz`)).status, 200);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    const closing = server.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const draining = await fetch(`${url}/readyz`);
    assert.equal(draining.status, 503);
    assert.match(await draining.text(), /draining/);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    await closing;
  });
});

describe('management guard', () => {
  let h: Harness;
  let root: string;
  let base: string;
  const token = 's3cret-token';
  before(async () => {
    root = await tempRepo('vs-ops-guard-');
    base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    await placeModel(join(root, 'roots'), 'other', 1, halfPlusTwoModel());
    const tokenFile = join(root, 'admin.token');
    await writeFile(tokenFile, `${token}\n`);
    h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      sagemakerPort: 0,
      sagemakerMultiModel: true,
      sagemakerModelRoots: [join(root, 'roots')],
      modelRoots: [join(root, 'roots')],
      kserveModelControlMode: 'explicit',
      adminTokenFile: tokenFile,
    });
  });
  after(() => h.close());

  const reload = (metadata: Record<string, string>): Promise<Uint8Array> =>
    h.grpc.unary(
      '/tensorflow.serving.ModelService/HandleReloadConfigRequest',
      toBinary(
        ReloadConfigRequestSchema,
        create(ReloadConfigRequestSchema, {
          config: {
            config: {
              case: 'modelConfigList',
              value: { config: [{ name: 'half', basePath: base, modelPlatform: 'onnx' }] },
            },
          },
        }),
      ),
      { metadata },
    );

  it('HandleReloadConfigRequest: PERMISSION_DENIED without the token, OK with it', async () => {
    await assert.rejects(reload({}), (e: ServingError) => e.code === Code.PERMISSION_DENIED);
    await assert.rejects(
      reload({ authorization: 'Bearer wrong' }),
      (e: ServingError) => e.code === Code.PERMISSION_DENIED,
    );
    await reload({ authorization: `Bearer ${token}` });
  });

  it('SageMaker multi-model load / unload: 403 without the token, 200 with it', async () => {
    const body = JSON.stringify({ model_name: 'other', url: join(root, 'roots', 'other') });
    const headers = { 'content-type': 'application/json' };
    const denied = await fetch(`${h.sagemaker}/models`, { method: 'POST', body, headers });
    assert.equal(denied.status, 403);
    assert.match(await denied.text(), /not permitted/);
    const auth = { ...headers, authorization: `Bearer ${token}` };
    assert.equal((await fetch(`${h.sagemaker}/models`, { method: 'POST', body, headers: auth })).status, 200);
    assert.equal((await fetch(`${h.sagemaker}/models/other`, { method: 'DELETE' })).status, 403);
    assert.equal(
      (await fetch(`${h.sagemaker}/models/other`, { method: 'DELETE', headers: auth })).status,
      200,
    );
    // Inference stays open.
    assert.equal((await postJson(`${h.sagemaker}/invocations`, { instances: [1] })).status, 200);
  });

  it('KServe repository load / unload: 403 without the token, 200 with it', async () => {
    const url = (action: string): string => `${h.rest}/v2/repository/models/other/${action}`;
    const denied = await fetch(url('load'), { method: 'POST', body: '{}' });
    assert.equal(denied.status, 403);
    assert.match(await denied.text(), /not permitted/);
    const auth = { authorization: `Bearer ${token}` };
    assert.equal((await fetch(url('load'), { method: 'POST', body: '{}', headers: auth })).status, 200);
    assert.equal((await fetch(`${h.rest}/v2/models/other/ready`)).status, 200);
    assert.equal((await fetch(url('unload'), { method: 'POST', body: '{}' })).status, 403);
    assert.equal((await fetch(url('unload'), { method: 'POST', body: '{}', headers: auth })).status, 200);
  });

  it('KServe gRPC RepositoryModelLoad / Unload: PERMISSION_DENIED without the token, OK with it', async () => {
    const address = `127.0.0.1:${h.server.ports.grpc!}`;
    const anonymous = createKServeGrpcClient({ address });
    const admin = createKServeGrpcClient({ address, metadata: { authorization: `Bearer ${token}` } });
    const denied = (e: ServingError): boolean =>
      e.code === Code.PERMISSION_DENIED && /not permitted/.test(e.message);
    try {
      await assert.rejects(anonymous.loadModel('other'), denied);
      assert.equal(await anonymous.modelReady({ name: 'half' }), true); // the rest stays open
      await admin.loadModel('other');
      assert.equal(await anonymous.modelReady({ name: 'other' }), true);
      await assert.rejects(anonymous.unloadModel('other'), denied);
      await admin.unloadModel('other');
      assert.equal((await fetch(`${h.rest}/v2/models/other/ready`)).status, 404);
    } finally {
      anonymous.close();
      admin.close();
    }
  });
});

describe('logging_config over a gRPC config reload', () => {
  it('a HandleReloadConfigRequest with logging_config logs requests, as the same config file would', async () => {
    const root = await tempRepo('vs-ops-reload-log-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    const configFile = join(root, 'models.config');
    await writeFile(configFile, `model_config_list { config { name: 'half' base_path: '${base}' } }`);
    const prefix = join(root, 'logs', 'half');
    const h = await startHarness({ modelConfigFile: configFile });
    try {
      await h.grpc.unary(
        '/tensorflow.serving.ModelService/HandleReloadConfigRequest',
        toBinary(
          ReloadConfigRequestSchema,
          create(ReloadConfigRequestSchema, {
            config: {
              config: {
                case: 'modelConfigList',
                value: {
                  config: [
                    {
                      name: 'half',
                      basePath: base,
                      loggingConfig: {
                        samplingConfig: { samplingRate: 1 },
                        logCollectorConfig: { filenamePrefix: prefix },
                      },
                    },
                  ],
                },
              },
            },
          }),
        ),
      );
      await grpcPredict(h.grpc, 'half', x([1, 2]));
      await h.server.flushRequestLogs();
    } finally {
      await h.close();
    }
    const files = (await readdir(join(root, 'logs'))).filter((f) => f.startsWith('half-'));
    assert.equal(files.length, 1, `request log files: ${files.join(',')}`);
  });
});

describe('request logging (logging_config) replayed as warmup', () => {
  it('records sampled predicts as PredictionLog files that warm a version up', async () => {
    const root = await tempRepo('vs-ops-reqlog-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    const prefix = join(root, 'logs', 'half');
    const configFile = join(root, 'models.config');
    await writeFile(
      configFile,
      `model_config_list { config { name: 'half' base_path: '${base}'
         logging_config { sampling_config { sampling_rate: 1.0 } log_collector_config { filename_prefix: '${prefix}' } } } }`,
    );
    const h = await startHarness({ modelConfigFile: configFile });
    const N = 4;
    try {
      for (let i = 0; i < N; i++) {
        if (i % 2 === 0) await grpcPredict(h.grpc, 'half', x([i, i + 1]));
        else
          assert.equal((await postJson(`${h.rest}/v1/models/half:predict`, { instances: [i] })).status, 200);
      }
      await h.server.flushRequestLogs();
    } finally {
      await h.close();
    }
    const files = (await readdir(join(root, 'logs'))).filter(
      (f) => f.startsWith('half-') && f.endsWith('.tfrecord'),
    );
    assert.equal(files.length, 1, files.join(','));

    // Version 2 ships the recorded file as its warmup file.
    const v2 = join(base, '2', 'assets.extra');
    await mkdir(v2, { recursive: true });
    await copyFile(join(base, '1', 'model.onnx'), join(base, '2', 'model.onnx'));
    await copyFile(join(root, 'logs', files[0]!), join(v2, 'tf_serving_warmup_requests'));
    const lines: string[] = [];
    const reports: WarmupReport[] = [];
    const config = resolveServerConfig({
      host: '127.0.0.1',
      grpcPort: 0,
      restPort: 0,
      sagemakerPort: -1,
      modelName: 'half',
      modelBasePath: base,
      monitoringConfigFile: await writeMonitoring(root),
    });
    const server = await startVisionServer(
      config,
      createJsonLogger({ level: 'info', write: (l) => lines.push(l) }),
      {
        onWarmup: (r) => reports.push(r),
      },
    );
    try {
      const report = reports.find((r) => r.version === 2);
      assert.ok(report !== undefined);
      assert.equal(report.kind, 'file');
      assert.equal(report.records, N);
      assert.ok(
        lines.some((l) => {
          const o = JSON.parse(l) as Record<string, unknown>;
          return (
            o['msg'] === 'warmup done' && o['kind'] === 'file' && o['records'] === N && o['version'] === 2
          );
        }),
        'a "warmup done" log line with kind file',
      );
      const families = await scrape(`http://127.0.0.1:${server.ports.rest!}`);
      assert.equal(sample(families, 'visionserve_warmup_runs_total', { model: 'half', kind: 'file' }), N);
      assert.equal(sample(families, ':tensorflow:serving:model_warmup_latency', { model_path: 'half/2' }), 1);
    } finally {
      await server.close();
    }
  });
});

describe('tracing (OTLP/HTTP)', () => {
  it('a request with traceparent produces spans with that trace id at the receiver', async () => {
    const received: unknown[] = [];
    const receiver = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces') received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as { port: number }).port;
    const root = await tempRepo('vs-ops-trace-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    const h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      otlpTracesEndpoint: `http://127.0.0.1:${port}/v1/traces`,
      traceSamplingRate: 0,
    });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    try {
      const res = await fetch(`${h.rest}/v1/models/half:predict`, {
        method: 'POST',
        body: JSON.stringify({ instances: [1, 2] }),
        headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      });
      assert.equal(res.status, 200);
      await res.text();
      // Not sampled: no traceparent and a root sampling rate of 0.
      await postJson(`${h.rest}/v1/models/half:predict`, { instances: [3] });
    } finally {
      await h.close(); // flushes the exporter
      receiver.close();
    }
    const spans: { traceId: string; name: string; parentSpanId?: string }[] = [];
    for (const body of received as { resourceSpans: { scopeSpans: { spans: typeof spans }[] }[] }[]) {
      for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
    }
    const ours = spans.filter((s) => s.traceId === traceId);
    const names = new Set(ours.map((s) => s.name));
    for (const name of ['tfs-rest Predict', 'decode', 'queue', 'inference', 'encode'])
      assert.ok(names.has(name), name);
    assert.equal(ours.find((s) => s.name === 'tfs-rest Predict')!.parentSpanId, '00f067aa0ba902b7');
    assert.equal(spans.length, ours.length, 'the request without traceparent was not traced');
  });
});

describe('CORS', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo('vs-ops-cors-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    h = await startHarness({ modelName: 'half', modelBasePath: base, enableCors: true });
  });
  after(() => h.close());

  it('answers preflights as TF Serving does and adds the headers', async () => {
    const ok = await fetch(`${h.rest}/v1/models/half:predict`, {
      method: 'OPTIONS',
      headers: { origin: 'https://console.example' },
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), '*');
    assert.equal(ok.headers.get('access-control-allow-methods'), 'POST, GET');
    const bad = await fetch(`${h.rest}/v1/models/half:predict`, { method: 'OPTIONS' });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /Origin header is missing in CORS preflight/);
    const res = await fetch(`${h.rest}/v1/models/half:predict`, {
      method: 'POST',
      body: '{"instances":[1]}',
    });
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    await res.text();
  });
});
