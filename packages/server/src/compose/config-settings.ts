/**
 * Factory settings that come from the config alone and are mapped from it (renamed, unit
 * changed, combined): the connection guard's limits (the same on every listener), an HTTP
 * listener's timeouts, the gRPC server's, the model manager's load retries. The factories
 * take them as they are (no defaults of their own), so a default lives only in config
 * DEFAULTS; tests that build one of them directly pass these functions DEFAULTS.
 */
import type { ServerConfig } from '../config/server-config.js';

/** The flags a listener's settings are read from. */
export type ListenerConfig = Pick<
  ServerConfig,
  | 'host'
  | 'maxConnections'
  | 'maxConnectionsPerAddress'
  | 'connectionFirstBytesTimeoutMs'
  | 'httpKeepaliveTimeoutMs'
  | 'httpHeadersTimeoutMs'
  | 'requestBodyTimeoutMs'
  | 'grpcTransport'
>;

/** The connection guard's limits, the same on every listener. */
export function connectionGuardSettings(config: ListenerConfig) {
  return {
    maxConnections: config.maxConnections,
    maxConnectionsPerAddress: config.maxConnectionsPerAddress,
    firstBytesTimeoutMs: config.connectionFirstBytesTimeoutMs,
  };
}

/** An HTTP listener's host, connection limits and timeouts (its port and edge aside). */
export function httpServerSettings(config: ListenerConfig) {
  return {
    host: config.host,
    ...connectionGuardSettings(config),
    keepAliveTimeoutMs: config.httpKeepaliveTimeoutMs,
    headersTimeoutMs: config.httpHeadersTimeoutMs,
    requestTimeoutMs: config.requestBodyTimeoutMs + config.httpHeadersTimeoutMs,
  };
}

/** The gRPC server's host, connection limits, body timeout and transport (its port and services aside). */
export function grpcServerSettings(config: ListenerConfig) {
  return {
    host: config.host,
    ...connectionGuardSettings(config),
    bodyTimeoutMs: config.requestBodyTimeoutMs,
    transport: config.grpcTransport,
  };
}

/** The model manager's load retries and version label rule. */
export function modelManagerSettings(
  config: Pick<
    ServerConfig,
    'maxNumLoadRetries' | 'loadRetryIntervalMicros' | 'allowVersionLabelsForUnavailableModels'
  >,
) {
  return {
    maxLoadRetries: config.maxNumLoadRetries,
    loadRetryIntervalMs: Math.max(0, config.loadRetryIntervalMicros / 1000),
    allowVersionLabelsForUnavailableModels: config.allowVersionLabelsForUnavailableModels,
  };
}
