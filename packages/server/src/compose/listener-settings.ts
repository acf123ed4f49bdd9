/**
 * The listeners' settings that come from the config alone: the connection guard's limits
 * (the same on every listener), an HTTP listener's timeouts and the gRPC server's. The
 * factories take them as they are (no defaults of their own), so a default lives only in
 * config DEFAULTS; tests that start a listener directly pass these functions DEFAULTS.
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
