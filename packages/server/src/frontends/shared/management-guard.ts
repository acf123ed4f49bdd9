import type { IncomingHttpHeaders } from 'node:http';
import { TLSSocket } from 'node:tls';

/** Who is at the other end of a TLS connection, as its client certificate says. */
export interface PeerIdentity {
  /** The client certificate was verified against the configured CA. */
  readonly authorized: boolean;
  /** Subject common name and the DNS / URI / email subject alternative names. */
  readonly names: readonly string[];
}

/** What a request presents to be allowed to manage models. */
export interface ManagementCredentials {
  /** The `Authorization` header (gRPC: metadata), e.g. "Bearer <token>". */
  readonly authorization: string | undefined;
  /** The verified client certificate's identity; undefined without TLS or without a client certificate. */
  peer(): PeerIdentity | undefined;
}

/**
 * Decides who may change the served model set (TF Serving's HandleReloadConfigRequest, the
 * SageMaker multi-model load/unload, KServe's repository extension). Every frontend with a
 * management operation calls `check` before acting; the composition root picks the policy.
 */
export interface ManagementGuard {
  /** Throws ServingError PERMISSION_DENIED (HTTP 403) when the caller may not do `action`. */
  check(credentials: ManagementCredentials, action: string): void;
}

/** Credentials of a request from its headers and socket (HTTP/1.1 or an HTTP/2 session's socket). */
export function credentialsOf(headers: IncomingHttpHeaders, socket: unknown): ManagementCredentials {
  const raw: string | string[] | undefined = headers.authorization;
  return {
    authorization: typeof raw === 'string' ? raw : raw?.[0],
    peer: () => peerIdentityOf(socket),
  };
}

/** The client certificate identity of a TLS socket; undefined for plaintext or no certificate. */
export function peerIdentityOf(socket: unknown): PeerIdentity | undefined {
  if (!(socket instanceof TLSSocket)) return undefined;
  const cert = socket.getPeerCertificate();
  if (Object.keys(cert).length === 0) return undefined;
  const names: string[] = [];
  const cn: string | string[] | undefined = cert.subject.CN;
  if (typeof cn === 'string') names.push(cn);
  else if (Array.isArray(cn)) names.push(...cn);
  for (const part of (cert.subjectaltname ?? '').split(',')) {
    const m = /^\s*(DNS|URI|email):(.+)$/.exec(part);
    if (m) names.push(m[2]!.trim());
  }
  return { authorized: socket.authorized, names };
}
