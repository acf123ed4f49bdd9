/**
 * Lifetime limits of one gRPC connection, as gRPC servers apply them (TF Serving's
 * `--grpc_channel_arguments`: grpc.max_connection_age_ms, grpc.max_connection_age_grace_ms,
 * grpc.max_connection_idle_ms, grpc.keepalive_time_ms, grpc.keepalive_timeout_ms). Age: a graceful GOAWAY once the connection is that old, with
 * ±10 % jitter so that connections opened together do not all go at once; the calls then open
 * finish, and after the grace (if set) the connection is closed whatever is left. Clients
 * reconnect, so behind a Kubernetes Service new replicas get their share of long-lived
 * clients. Idle: a graceful GOAWAY once the connection has had no open call that long.
 * Keepalive: a PING at an interval; one unanswered within the timeout closes the connection
 * (a peer gone without a FIN, e.g. behind a NAT that dropped the flow, frees its calls).
 */

export interface ConnectionLimits {
  /** Graceful GOAWAY this long after the connection opened (±10 %), in ms. 0 or absent: never. */
  readonly maxAgeMs?: number | undefined;
  /** After the age GOAWAY, calls still open get this long before the connection is closed, in ms. Absent: no limit. */
  readonly maxAgeGraceMs?: number | undefined;
  /** Graceful GOAWAY after this long without an open call, in ms. 0 or absent: never. */
  readonly maxIdleMs?: number | undefined;
  /** A keepalive PING this long after the last one was answered, in ms. 0 or absent: none. */
  readonly keepaliveTimeMs?: number | undefined;
  /** A keepalive PING unanswered this long closes the connection, in ms. Default 20000 (gRPC's). */
  readonly keepaliveTimeoutMs?: number | undefined;
}

/** gRPC's default grpc.keepalive_timeout_ms. */
export const DEFAULT_KEEPALIVE_TIMEOUT_MS = 20_000;

export interface ConnectionActions {
  /** Sends GOAWAY: no new calls, the open ones finish, then the connection closes. */
  drain(): void;
  /** Closes the connection now. */
  destroy(): void;
  /** Sends a PING; `onAck` runs when it is answered. */
  ping(onAck: () => void): void;
  /** A limit ended the connection (before `drain` or `destroy` runs). Default: nothing. */
  limited?(reason: LimitReason): void;
}

/** Why a limit ended a connection (metrics label). */
export type LimitReason = 'max_age' | 'max_idle' | 'keepalive_timeout';

/** Connections one listener ended by each limit, since start. */
export function createLimitCounts(): {
  readonly counts: Map<LimitReason, number>;
  count(reason: LimitReason): void;
} {
  const counts = new Map<LimitReason, number>();
  return {
    counts,
    count(reason) {
      counts.set(reason, (counts.get(reason) ?? 0) + 1);
    },
  };
}

export interface ConnectionLifetime {
  /** The number of calls open on the connection changed. */
  activeStreams(count: number): void;
  /** The connection closed: timers stop. */
  closed(): void;
}

/** Whether any limit is set (otherwise a connection needs no watch). */
export function hasConnectionLimits(limits: ConnectionLimits): boolean {
  return (limits.maxAgeMs ?? 0) > 0 || (limits.maxIdleMs ?? 0) > 0 || (limits.keepaliveTimeMs ?? 0) > 0;
}

export function watchConnectionLifetime(
  limits: ConnectionLimits,
  actions: ConnectionActions,
  /** Random numbers in [0, 1) for the jitter. Default Math.random. */
  random: () => number = Math.random,
): ConnectionLifetime {
  const maxIdle = limits.maxIdleMs ?? 0;
  let idleTimer: NodeJS.Timeout | undefined;
  let graceTimer: NodeJS.Timeout | undefined;
  let done = false;
  const armIdle = (): void => {
    if (maxIdle <= 0 || done || idleTimer !== undefined) return;
    idleTimer = setTimeout(() => {
      idleTimer = undefined;
      if (done) return;
      actions.limited?.('max_idle');
      actions.drain();
    }, maxIdle);
    idleTimer.unref();
  };
  let ageTimer: NodeJS.Timeout | undefined;
  const maxAge = limits.maxAgeMs ?? 0;
  if (maxAge > 0) {
    ageTimer = setTimeout(
      () => {
        ageTimer = undefined;
        if (done) return;
        actions.limited?.('max_age');
        actions.drain();
        const grace = limits.maxAgeGraceMs;
        if (grace !== undefined && grace >= 0) {
          graceTimer = setTimeout(() => {
            if (!done) actions.destroy();
          }, grace);
          graceTimer.unref();
        }
      },
      maxAge * (0.9 + 0.2 * random()),
    );
    ageTimer.unref();
  }
  armIdle();
  // Keepalive: a PING every keepaliveTimeMs after the previous answer; no answer within the
  // timeout means the peer or the path is gone, and the connection is closed.
  let keepaliveTimer: NodeJS.Timeout | undefined;
  const keepalive = limits.keepaliveTimeMs ?? 0;
  const keepaliveTimeout = limits.keepaliveTimeoutMs ?? DEFAULT_KEEPALIVE_TIMEOUT_MS;
  const armKeepalive = (): void => {
    if (keepalive <= 0 || done) return;
    keepaliveTimer = setTimeout(() => {
      if (done) return;
      keepaliveTimer = setTimeout(() => {
        if (done) return;
        actions.limited?.('keepalive_timeout');
        actions.destroy();
      }, keepaliveTimeout);
      keepaliveTimer.unref();
      actions.ping(() => {
        clearTimeout(keepaliveTimer);
        armKeepalive();
      });
    }, keepalive);
    keepaliveTimer.unref();
  };
  armKeepalive();
  return {
    activeStreams(count) {
      if (count === 0) armIdle();
      else if (idleTimer !== undefined) {
        clearTimeout(idleTimer);
        idleTimer = undefined;
      }
    },
    closed() {
      done = true;
      clearTimeout(idleTimer);
      clearTimeout(ageTimer);
      clearTimeout(graceTimer);
      clearTimeout(keepaliveTimer);
    },
  };
}
