import { parseTextMessage } from '@visionserve/protocol/pbtxt';
import { MonitoringConfigSchema } from '@visionserve/protocol/tfs-proto';

/** TF Serving's `MonitoringConfig` (`--monitoring_config_file`). */
export interface MonitoringConfig {
  /** Serve Prometheus metrics (`prometheus_config.enable`). */
  readonly prometheusEnabled: boolean;
  /** Path of the metrics page (`prometheus_config.path`). Default "/monitoring/prometheus/metrics". */
  readonly prometheusPath: string;
}

/** TF Serving's default metrics path. */
export const DEFAULT_PROMETHEUS_PATH = '/monitoring/prometheus/metrics';

/**
 * Parses `prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }`.
 * Throws INVALID_ARGUMENT for syntax errors, unknown fields or a path not starting with "/".
 */
export function parseMonitoringConfig(
  text: string,
  options: { readonly source?: string } = {},
): MonitoringConfig {
  const parsed = parseTextMessage(MonitoringConfigSchema, text, {
    source: options.source ?? 'monitoring config',
  });
  const prometheus = parsed.message.prometheusConfig;
  if (prometheus === undefined) return { prometheusEnabled: false, prometheusPath: DEFAULT_PROMETHEUS_PATH };
  if (prometheus.path !== '' && !prometheus.path.startsWith('/'))
    throw parsed.error(`prometheus_config.path must start with "/"`, prometheus, 'path');
  return { prometheusEnabled: prometheus.enable, prometheusPath: prometheus.path || DEFAULT_PROMETHEUS_PATH };
}
