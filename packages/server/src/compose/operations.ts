/**
 * The operational pieces the flags ask for (metrics, access log, request log hub, tracing, TLS
 * files, the model-management guard), each absent and free when off; and the observers that feed
 * them from core and the transports.
 */
import { readFile } from 'node:fs/promises';
import { type ServerConfig } from '../config/server-config.js';
import type { ModelManager } from '../core/model-manager.js';
import type { ServableAssets } from '../contracts/servable-assets.js';
import { ConfigError } from '../config/config-error.js';
import type { Logger } from '../util/logger.js';
import type { InferenceObserver } from '../core/inference-observer.js';
import type { RequestObserver } from '../frontends/shared/request-observer.js';
import { parseMonitoringConfig } from '../repository/monitoring-config-file.js';
import type { ServingMetrics, createServingMetrics } from '../observability/serving-metrics.js';
import { createAccessLog } from '../observability/access-log.js';
import { type RequestSink, createRequestHub } from '../observability/request-hub.js';
import type { RequestTracer } from '../observability/tracing.js';
import { type TlsFiles, loadTlsFiles } from '../security/tls-files.js';
import { createManagementPolicy } from '../security/management-policy.js';

export function metricsOf(ops: Operations): ServingMetrics {
  return ops.metrics!;
}

/** The operational pieces the flags ask for; each is absent (and costs nothing) when off. */
export interface Operations {
  readonly metrics:
    | (ServingMetrics & {
        attach(sources: MetricSources): void;
        requestLogged(model: string, outcome: 'written' | 'dropped'): void;
      })
    | undefined;
  readonly metricsPath: string;
  readonly sinks: readonly RequestSink[];
  readonly tls: TlsFiles | undefined;
  readonly guard: ReturnType<typeof createManagementPolicy>;
  readonly guardOpen: boolean;
  close(): Promise<void>;
}

export type MetricSources = NonNullable<Parameters<typeof createServingMetrics>[0]>;

export async function createOperations(config: ServerConfig, logger: Logger): Promise<Operations> {
  let metrics: Operations['metrics'];
  let metricsPath = '';
  if (config.monitoringConfigFile !== undefined) {
    const file = config.monitoringConfigFile;
    let monitoring;
    try {
      monitoring = parseMonitoringConfig(await readFile(file, 'utf8'), { source: file });
    } catch (error) {
      throw new ConfigError(
        `--monitoring_config_file: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    if (monitoring.prometheusEnabled) {
      // Loaded only when asked for: prom-client (and what it pulls in) costs every start-up otherwise.
      const metricsModule = await import('../observability/serving-metrics.js');
      metrics = createLateBoundMetrics(
        metricsModule.createServingMetrics,
        config.enableBatching,
        config.responseCacheBytes > 0,
      );
      metricsPath = monitoring.prometheusPath;
    }
  }
  const sinks: RequestSink[] = [];
  if (metrics !== undefined) sinks.push(metrics);
  // Failed requests are access-logged at any sampling rate (up to a rate per second).
  if (config.accessLogSamplingRate > 0 || config.accessLogMaxFailuresPerSecond > 0) {
    sinks.push(
      createAccessLog({
        logger: logger.child({ component: 'access' }),
        samplingRate: config.accessLogSamplingRate,
        maxFailuresPerSecond: config.accessLogMaxFailuresPerSecond,
      }),
    );
  }
  let tracer: RequestTracer | undefined;
  if (config.otlpTracesEndpoint !== undefined) {
    // Loaded only when asked for: without an endpoint no OpenTelemetry code is imported.
    const { createRequestTracer } = await import('../observability/tracing.js');
    tracer = createRequestTracer({
      endpoint: config.otlpTracesEndpoint,
      samplingRate: config.traceSamplingRate,
      batching: config.enableBatching,
      logger: logger.child({ component: 'tracing' }),
    });
    sinks.push(tracer);
  }
  let tls: TlsFiles | undefined;
  if (config.sslConfigFile !== undefined) {
    try {
      tls = await loadTlsFiles({
        configFile: config.sslConfigFile,
        pollIntervalMs: config.sslConfigPollSeconds * 1000,
        logger: logger.child({ component: 'tls' }),
      });
    } catch (error) {
      throw new ConfigError(`--ssl_config_file: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (config.adminClientNames.length > 0 && tls?.clientVerify !== true) {
    throw new ConfigError('--admin_client_names needs --ssl_config_file with client_verify: true');
  }
  let guard: Operations['guard'];
  try {
    guard = createManagementPolicy({
      disabled: config.disableModelManagement,
      tokenFile: config.adminTokenFile,
      clientNames: config.adminClientNames,
      logger: logger.child({ component: 'management' }),
    });
  } catch (error) {
    throw new ConfigError(error instanceof Error ? error.message : String(error));
  }
  return {
    metrics,
    metricsPath,
    sinks,
    tls,
    guard,
    guardOpen: guard.open,
    async close() {
      tls?.close();
      await tracer?.shutdown();
    },
  };
}

/** Metrics whose scrape-time sources (manager, budget, batching) are attached once they exist. */
function createLateBoundMetrics(
  create: typeof createServingMetrics,
  batchingOn: boolean,
  cacheOn: boolean,
): NonNullable<Operations['metrics']> {
  let sources: MetricSources = {};
  const metrics = create({
    versionStates: () => sources.versionStates?.() ?? [],
    queueDepths: () => sources.queueDepths?.() ?? [],
    batching: batchingOn ? () => sources.batching?.() ?? [] : undefined,
    inflight: () => sources.inflight?.() ?? { bytes: 0, requests: 0, shed: 0 },
    shed: () => sources.shed?.() ?? new Map<string, number>(),
    grpcConnections: () => sources.grpcConnections?.(),
    listenerConnections: () => sources.listenerConnections?.() ?? [],
    frameStreams: () => sources.frameStreams?.(),
    responseCache: cacheOn ? () => sources.responseCache?.() : undefined,
  });
  return Object.assign(metrics, {
    attach(next: MetricSources) {
      sources = next;
    },
  });
}

/** Observers for core and the transports: undefined (no hook at all) when nothing observes requests. */
export function observe(
  ops: Operations,
  requestLog: InferenceObserver,
): { request: RequestObserver | undefined; inference: InferenceObserver } {
  const predictObservers: InferenceObserver[] = [requestLog];
  if (ops.metrics !== undefined) predictObservers.unshift(ops.metrics);
  if (ops.sinks.length === 0) return { request: undefined, inference: requestLog };
  const hub = createRequestHub({ requestSinks: ops.sinks, predictObservers });
  return { request: hub.requestObserver, inference: hub.inferenceObserver };
}

/** Runs queued per AVAILABLE version (scrape time). */
export function queueDepths(
  manager: ModelManager<ServableAssets>,
): { model: string; version: number; queued: number }[] {
  const out: { model: string; version: number; queued: number }[] = [];
  for (const model of manager.modelNames()) {
    let statuses: readonly { version: number; state: string }[] = [];
    try {
      statuses = manager.status(model);
    } catch {
      continue;
    }
    for (const s of statuses) {
      if (s.state !== 'AVAILABLE') continue;
      try {
        const handle = manager.acquire({ name: model, version: s.version });
        try {
          out.push({ model, version: s.version, queued: handle.session.pressure?.().queued ?? 0 });
        } finally {
          handle.release();
        }
      } catch {
        // Unloaded in between.
      }
    }
  }
  return out;
}

/** Loopback addresses: management open there is a local-only concern. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '::1' || host === '[::1]';
}

/** TF Serving leaves model management open; say so when that is reachable from the network. */
export function warnIfManagementOpen(config: ServerConfig, open: boolean, logger: Logger): void {
  if (!open || isLoopback(config.host)) return;
  const exposed = [
    ...(config.grpcPort >= 0 ? ['gRPC HandleReloadConfigRequest'] : []),
    ...(config.sagemakerPort >= 0 && config.sagemakerMultiModel
      ? ['SageMaker multi-model POST/DELETE /models']
      : []),
  ];
  if (exposed.length === 0) return;
  logger.warn(
    'model management is open to anyone who reaches this address; restrict it with --admin_token_file, --admin_client_names or --disable_model_management',
    { host: config.host, exposed },
  );
}
