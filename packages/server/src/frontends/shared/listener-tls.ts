import type { SecureContextOptions, TlsOptions } from 'node:tls';

/** TLS of one listener (TF Serving's SSLConfig, applied to every listener). */
export interface ListenerTls {
  /** Key, certificate and CA bundle (PEM) the listener starts with. */
  readonly context: SecureContextOptions;
  /** Ask every client for a certificate and refuse those the CA does not verify (SSLConfig `client_verify`). */
  readonly clientVerify: boolean;
  /**
   * Subscribes to certificate changes (rotation without restart): `apply` is called with the
   * new files' contents and the listener uses them for new connections. Returns an unsubscribe.
   */
  readonly subscribe?: ((apply: (context: SecureContextOptions) => void) => () => void) | undefined;
}

/** Node's server options for a listener's TLS. */
export function tlsServerOptions(tls: ListenerTls): TlsOptions {
  return {
    ...tls.context,
    requestCert: tls.clientVerify,
    rejectUnauthorized: tls.clientVerify,
    minVersion: 'TLSv1.2',
  };
}
