/**
 * The connections of one listener (REST, SageMaker, gRPC; plain or TLS), from the moment the
 * TCP socket is accepted: how many are open, which are idle and since when, and the limits
 * that keep idle sockets from locking the listener out:
 *
 * - a deadline for the first bytes: a connection whose TLS handshake and first protocol unit
 *   (the first complete HTTP/1.1 request head, the HTTP/2 preface with the client's SETTINGS)
 *   are not done this long after accept is destroyed;
 * - the connection cap: at `maxConnections` the connection idle the longest (nothing in
 *   flight; one still waiting for its first bytes counts as idle since it was accepted) is
 *   closed to make room, and a new one is refused only when none is idle;
 * - an optional cap per client address: connections beyond it are refused at accept.
 *
 * The listener reports what happens on each connection (first bytes complete, work in flight)
 * through its GuardedConnection; how an evicted connection closes is the listener's choice
 * (HTTP destroys an idle keep-alive socket, gRPC sends GOAWAY first).
 */
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

export interface ConnectionGuardLimits {
  /** Most connections at once (`--max_connections`). 0: no limit. */
  readonly maxConnections: number;
  /** Most connections at once from one client address (`--max_connections_per_address`). 0 or absent: no limit. */
  readonly maxConnectionsPerAddress?: number | undefined;
  /**
   * Time from accept to the first bytes complete (TLS handshake, HTTP/2 preface and SETTINGS,
   * first HTTP/1.1 request head), ms (`--connection_first_bytes_timeout_ms`). 0 or absent: none.
   */
  readonly firstBytesTimeoutMs?: number | undefined;
}

/** Why the guard closed or refused a connection (metrics label). */
export type GuardReason = 'first_bytes_timeout' | 'evicted_idle' | 'refused_at_cap' | 'refused_per_address';

/** One admitted connection, as its listener reports on it. */
export interface GuardedConnection {
  /** The first bytes are complete: the first-bytes deadline stops. */
  started(): void;
  /** The number of requests or calls in flight on it is now `count` (0: idle from now). */
  inFlight(count: number): void;
  /** How the connection is closed when evicted at the cap. Default: the socket is destroyed. */
  onEvict(close: () => void): void;
  /** The socket the listener serves on it (the TLS socket over a TCP one); closes with the connection. */
  adopt(socket: Socket): void;
}

/** What a listener's drain reads of a connection. */
export interface ConnectionState {
  readonly socket: Socket;
  /** Requests or calls in flight. */
  readonly busy: number;
  /** When it last turned idle (or was accepted), Date.now() ms. */
  readonly idleSince: number;
}

export interface ConnectionGuard {
  /**
   * An accepted TCP socket: its GuardedConnection, or undefined when it is refused (the socket
   * is destroyed; an idle connection may have been evicted to make room instead).
   */
  admit(socket: Socket): GuardedConnection | undefined;
  /** Connections open now (evicted ones no longer count). */
  readonly size: number;
  /** Every connection open now. */
  connections(): IterableIterator<ConnectionState>;
  /** Connections closed or refused by each limit since start. */
  readonly counts: ReadonlyMap<GuardReason, number>;
  /** Destroys every connection. */
  destroyAll(): void;
}

interface Entry extends ConnectionState {
  socket: Socket;
  busy: number;
  idleSince: number;
  readonly address: string;
  timer: NodeJS.Timeout | undefined;
  evict: (() => void) | undefined;
  gone: boolean;
}

export function createConnectionGuard(limits: ConnectionGuardLimits): ConnectionGuard {
  const entries = new Set<Entry>();
  /** Idle entries, oldest idle first (re-inserted when they turn idle again). */
  const idle = new Set<Entry>();
  const perAddress = new Map<string, number>();
  const counts = new Map<GuardReason, number>();
  const count = (reason: GuardReason): void => {
    counts.set(reason, (counts.get(reason) ?? 0) + 1);
  };
  const perAddressLimit = limits.maxConnectionsPerAddress ?? 0;
  const firstBytesMs = limits.firstBytesTimeoutMs ?? 0;

  /** The entry stops counting (closed, or evicted and closing). */
  const forget = (entry: Entry): void => {
    if (entry.gone) return;
    entry.gone = true;
    if (entry.timer !== undefined) clearTimeout(entry.timer);
    entries.delete(entry);
    idle.delete(entry);
    const left = (perAddress.get(entry.address) ?? 1) - 1;
    if (left <= 0) perAddress.delete(entry.address);
    else perAddress.set(entry.address, left);
  };

  /** Closes the connection idle the longest; false when every connection is busy. */
  const evictOldestIdle = (): boolean => {
    const oldest = idle.values().next();
    if (oldest.done === true) return false;
    const entry = oldest.value;
    forget(entry);
    count('evicted_idle');
    if (entry.evict === undefined) entry.socket.destroy();
    else entry.evict();
    return true;
  };

  const refuse = (socket: Socket, reason: GuardReason): void => {
    count(reason);
    socket.destroy();
  };

  const track = (entry: Entry, socket: Socket): void => {
    socket.once('close', () => {
      forget(entry);
    });
  };

  return {
    admit(socket) {
      const address = socket.remoteAddress ?? '';
      if (perAddressLimit > 0 && (perAddress.get(address) ?? 0) >= perAddressLimit) {
        refuse(socket, 'refused_per_address');
        return undefined;
      }
      if (limits.maxConnections > 0 && entries.size >= limits.maxConnections && !evictOldestIdle()) {
        refuse(socket, 'refused_at_cap');
        return undefined;
      }
      const entry: Entry = {
        socket,
        busy: 0,
        idleSince: Date.now(),
        address,
        timer: undefined,
        evict: undefined,
        gone: false,
      };
      entries.add(entry);
      idle.add(entry);
      perAddress.set(address, (perAddress.get(address) ?? 0) + 1);
      track(entry, socket);
      if (firstBytesMs > 0) {
        entry.timer = setTimeout(() => {
          entry.timer = undefined;
          if (entry.gone) return;
          count('first_bytes_timeout');
          entry.socket.destroy();
        }, firstBytesMs);
        entry.timer.unref();
      }
      return guarded(entry, idle, track);
    },
    get size() {
      return entries.size;
    },
    connections: () => entries.values(),
    counts,
    destroyAll() {
      for (const entry of entries) entry.socket.destroy();
    },
  };
}

/** The listener's side of one entry. */
function guarded(
  entry: Entry,
  idle: Set<Entry>,
  track: (entry: Entry, socket: Socket) => void,
): GuardedConnection {
  return {
    started() {
      if (entry.timer === undefined) return;
      clearTimeout(entry.timer);
      entry.timer = undefined;
    },
    inFlight(count) {
      const wasIdle = entry.busy === 0;
      entry.busy = count;
      if (entry.gone) return;
      if (count > 0) idle.delete(entry);
      else if (!wasIdle) {
        entry.idleSince = Date.now();
        idle.add(entry);
      }
    },
    onEvict(close) {
      entry.evict = close;
    },
    adopt(socket) {
      if (socket === entry.socket) return;
      entry.socket = socket;
      track(entry, socket);
    },
  };
}

/** The TCP socket under a server-side TLS socket (node keeps it as `_parent`), what `admit` was given. */
export function tcpSocketOf(socket: TLSSocket): Socket {
  return (socket as unknown as { _parent?: Socket | null })._parent ?? socket;
}
