import { parseTextMessage } from '@visionserve/protocol/pbtxt';
import { SSLConfigSchema } from '@visionserve/protocol/tfs-proto';

/**
 * TF Serving's `SSLConfig` (`--ssl_config_file`). In TF Serving the three PEM fields hold
 * the PEM text itself; here a value that does not start with "-----BEGIN" is also accepted
 * as the path of a PEM file (relative to the config file's directory), so that rotated
 * certificate files (e.g. a Kubernetes secret) are picked up without editing this file.
 */
export interface SslConfig {
  /** The server's private key: PEM text, or the path of a PEM file. */
  readonly serverKey: string;
  /** The server's certificate chain: PEM text, or a path. */
  readonly serverCert: string;
  /** CA bundle that client certificates must chain to: PEM text, or a path; "" for none. */
  readonly customCa: string;
  /** Require and verify a client certificate (mutual TLS). */
  readonly clientVerify: boolean;
}

export interface ParseSslConfigOptions {
  /** Name used in error messages (e.g. the file name). Default "ssl config". */
  readonly source?: string;
}

/**
 * Parses the SSLConfig text format:
 *
 *     server_key: "-----BEGIN PRIVATE KEY-----\n..."   server_cert: "..."
 *     custom_ca: "..."   client_verify: true
 *
 * Throws INVALID_ARGUMENT (line:column) for syntax errors, unknown fields, a missing key or
 * certificate, and `client_verify` without `custom_ca`.
 */
export function parseSslConfig(text: string, options: ParseSslConfigOptions = {}): SslConfig {
  const parsed = parseTextMessage(SSLConfigSchema, text, { source: options.source ?? 'ssl config' });
  const { serverKey, serverCert, customCa, clientVerify } = parsed.message;
  const root = parsed.message;
  if (serverKey === '') throw parsed.error('SSLConfig needs server_key', root);
  if (serverCert === '') throw parsed.error('SSLConfig needs server_cert', root);
  if (clientVerify && customCa === '') {
    throw parsed.error(
      'SSLConfig client_verify needs custom_ca (the CA that signs client certificates)',
      root,
    );
  }
  return { serverKey, serverCert, customCa, clientVerify };
}

/** Whether an SSLConfig value is PEM text (else it names a file). */
export function isInlinePem(value: string): boolean {
  return value.trimStart().startsWith('-----BEGIN');
}
