/**
 * TF Serving's `--grpc_channel_arguments`: comma-separated `name=value` arguments for the
 * gRPC server (e.g. `grpc.max_connection_age_ms=60000`). The ones this server applies are
 * read into GrpcServerArguments; any other name is returned in `ignored` (gRPC servers too
 * ignore arguments they do not know), so that the server can say so at start.
 */
import { ConfigError } from './config-error.js';

export interface GrpcServerArguments {
  /** grpc.max_connection_age_ms. */
  readonly maxConnectionAgeMs?: number;
  /** grpc.max_connection_age_grace_ms. */
  readonly maxConnectionAgeGraceMs?: number;
  /** grpc.max_connection_idle_ms. */
  readonly maxConnectionIdleMs?: number;
  /** grpc.keepalive_time_ms. */
  readonly keepaliveTimeMs?: number;
  /** grpc.keepalive_timeout_ms. */
  readonly keepaliveTimeoutMs?: number;
  /** grpc.max_concurrent_streams: streams per connection (HTTP/2 SETTINGS). */
  readonly maxConcurrentStreams?: number;
  /** grpc.max_receive_message_length: largest request message in bytes (-1: no limit). */
  readonly maxReceiveMessageBytes?: number;
}

const NAMES: Readonly<Record<string, keyof GrpcServerArguments>> = {
  'grpc.max_connection_age_ms': 'maxConnectionAgeMs',
  'grpc.max_connection_age_grace_ms': 'maxConnectionAgeGraceMs',
  'grpc.max_connection_idle_ms': 'maxConnectionIdleMs',
  'grpc.keepalive_time_ms': 'keepaliveTimeMs',
  'grpc.keepalive_timeout_ms': 'keepaliveTimeoutMs',
  'grpc.max_concurrent_streams': 'maxConcurrentStreams',
  'grpc.max_receive_message_length': 'maxReceiveMessageBytes',
};

/** The argument names this server applies. */
export const APPLIED_GRPC_ARGUMENTS: readonly string[] = Object.keys(NAMES);

export function parseGrpcChannelArguments(entries: readonly string[]): {
  readonly applied: GrpcServerArguments;
  readonly ignored: readonly string[];
} {
  const applied: Record<string, number> = {};
  const ignored: string[] = [];
  for (const entry of entries) {
    const at = entry.indexOf('=');
    if (at <= 0) {
      throw new ConfigError(`--grpc_channel_arguments: expected name=value, got "${entry}"`);
    }
    const name = entry.slice(0, at).trim();
    const raw = entry.slice(at + 1).trim();
    const key = NAMES[name];
    if (key === undefined) {
      ignored.push(name);
      continue;
    }
    const value = /^-?[0-9]{1,15}$/.test(raw) ? Number(raw) : Number.NaN;
    const min = key === 'maxReceiveMessageBytes' ? -1 : key === 'maxConcurrentStreams' ? 1 : 0;
    if (
      !Number.isSafeInteger(value) ||
      value < min ||
      (key === 'maxConcurrentStreams' && value > 2 ** 31 - 1)
    ) {
      throw new ConfigError(`--grpc_channel_arguments: ${name} must be an integer >= ${min}, got "${raw}"`);
    }
    applied[key] = value;
  }
  return { applied, ignored };
}
