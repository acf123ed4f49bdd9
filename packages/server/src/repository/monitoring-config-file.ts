import { parsePbtxt, readMessage } from '@visionserve/protocol/pbtxt';

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
  const source = options.source ?? 'monitoring config';
  const root = readMessage(parsePbtxt(text, { source }), source);
  root.checkKnown(['prometheus_config'], 'MonitoringConfig');
  const prometheus = root.messageField('prometheus_config');
  if (prometheus === undefined) return { prometheusEnabled: false, prometheusPath: DEFAULT_PROMETHEUS_PATH };
  prometheus.checkKnown(['enable', 'path'], 'prometheus_config');
  const path = prometheus.string('path') ?? '';
  if (path !== '' && !path.startsWith('/'))
    throw prometheus.error(`prometheus_config.path must start with "/"`);
  return {
    prometheusEnabled: prometheus.bool('enable') ?? false,
    prometheusPath: path || DEFAULT_PROMETHEUS_PATH,
  };
}
