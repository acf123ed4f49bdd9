/**
 * TLS for the client's own connections (gRPC over HTTP/2, HTTP/1.1): which addresses use it,
 * the options a caller gives (a private CA, a client certificate for servers that verify
 * clients), and the socket. The server's certificate is always checked unless the caller
 * turns that off.
 */
import net, { isIP } from 'node:net';
import nodeTls from 'node:tls';
import { Code, ServingError } from '@visionserve/protocol';

/** TLS settings of a client (`tls` in the clients' options). */
export interface ClientTlsOptions {
  /**
   * CA certificate(s), PEM, that the server's certificate must chain to. Replaces Node's
   * bundled public roots (a server with a certificate from a public CA needs none).
   */
  readonly ca?: string | Buffer | readonly (string | Buffer)[];
  /** Client certificate chain, PEM: for servers that require one (mutual TLS). */
  readonly cert?: string | Buffer;
  /** The client certificate's private key, PEM. */
  readonly key?: string | Buffer;
  /** Passphrase of an encrypted `key`. */
  readonly passphrase?: string;
  /**
   * Host name the server's certificate must name, also sent as SNI. Default: the address's
   * host (for an IP address, the certificate must list that IP).
   */
  readonly servername?: string;
  /** Set false to accept any server certificate (tests only: anyone can then intercept). Default true. */
  readonly rejectUnauthorized?: boolean;
}

/**
 * A server address as a URL: "host:port" takes https:// when TLS options are given, else
 * http://. Throws INVALID_ARGUMENT for what is not a URL.
 */
export function serverUrl(address: string, options: ClientTlsOptions | undefined, what: string): URL {
  try {
    return new URL(address.includes('://') ? address : `${options ? 'https' : 'http'}://${address}`);
  } catch {
    throw new ServingError(Code.INVALID_ARGUMENT, `Bad ${what}: ${address}`);
  }
}

/** The host to connect to: the URL's host name, an IPv6 address without its brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Whether a connection to `url` uses TLS: https:// does, http:// does not, and `tls` options
 * with an http:// URL are refused rather than silently sent in clear.
 */
export function usesTls(url: URL, options: ClientTlsOptions | undefined, what: string): boolean {
  if (options !== undefined) checkTlsOptions(options);
  if (url.protocol === 'https:') return true;
  if (url.protocol !== 'http:') {
    throw new ServingError(Code.INVALID_ARGUMENT, `Unsupported URL scheme ${url.protocol} for ${what}`);
  }
  if (options !== undefined) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      `TLS options were given but ${what} is http:// (plaintext): use https://`,
    );
  }
  return false;
}

/**
 * Refuses, when the client is made, TLS settings that cannot work: an empty `ca` (a file that
 * turned out empty; node would read it as "not given" and trust its public roots instead of
 * the private CA the caller meant), and a CA, certificate or key that OpenSSL cannot load (not
 * PEM, a wrong passphrase, a key that does not match the certificate), which would otherwise
 * fail every connection.
 */
function checkTlsOptions(options: ClientTlsOptions): void {
  const ca = options.ca;
  if (ca !== undefined) {
    const list = typeof ca === 'string' || Buffer.isBuffer(ca) ? [ca] : ca;
    if (list.length === 0 || list.some((c) => c.length === 0)) {
      throw new ServingError(
        Code.INVALID_ARGUMENT,
        'TLS option ca is empty: give the PEM of the CA to trust',
      );
    }
    // OpenSSL skips what is not a PEM certificate without an error: a DER file would leave no CA.
    const pem = (c: string | Buffer): boolean =>
      (typeof c === 'string' ? c : c.toString('latin1')).includes('-----BEGIN CERTIFICATE-----');
    if (!list.every(pem)) {
      throw new ServingError(
        Code.INVALID_ARGUMENT,
        'TLS option ca holds no PEM certificate (-----BEGIN CERTIFICATE-----); convert a DER file with `openssl x509 -inform der`',
      );
    }
  }
  if (ca === undefined && options.cert === undefined && options.key === undefined) return;
  try {
    nodeTls.createSecureContext(tlsConnectionOptions('localhost', options));
  } catch (error) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      `TLS options ca, cert and key cannot be used: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** Node's connection options for `options` (every field left out that the caller did not set). */
export function tlsConnectionOptions(
  host: string,
  options: ClientTlsOptions | undefined,
): nodeTls.ConnectionOptions {
  const o = options ?? {};
  const servername = o.servername ?? (isIP(host) === 0 ? host : undefined);
  return {
    ...(o.ca !== undefined
      ? { ca: typeof o.ca === 'string' || Buffer.isBuffer(o.ca) ? o.ca : [...o.ca] }
      : {}),
    ...(o.cert !== undefined ? { cert: o.cert } : {}),
    ...(o.key !== undefined ? { key: o.key } : {}),
    ...(o.passphrase !== undefined ? { passphrase: o.passphrase } : {}),
    ...(servername !== undefined ? { servername } : {}),
    rejectUnauthorized: o.rejectUnauthorized ?? true,
    minVersion: 'TLSv1.2',
  };
}

/** How a socket reads: into the buffer `buffer()` gives, then `callback(n, buffer)` (net's `onread`). */
export interface SocketReads {
  readonly buffer: () => Uint8Array;
  readonly callback: (n: number, buffer: Uint8Array) => boolean;
}

/**
 * The last TLS session a server gave one client (a transport, a channel): its next
 * connections resume it instead of a full handshake, as node:https's agent does.
 */
export interface TlsSessionCache {
  session: Buffer | undefined;
}

/** Where a socket goes. */
export interface SocketTarget {
  readonly host: string;
  readonly port: number;
  /** TLS settings; undefined: plain TCP. */
  readonly tls: ClientTlsOptions | undefined;
  /** Session tickets kept between connections of one client (TLS only). */
  readonly sessions?: TlsSessionCache | undefined;
}

/** A TLS handshake must finish within this, ms (the call's deadline may end it sooner). */
export const TLS_HANDSHAKE_TIMEOUT_MS = 20_000;

/**
 * A connection to host:port, plain TCP or TLS offering one ALPN protocol, with Nagle off.
 * Both read through `onread`: over TLS, node decrypts each record into its own 16 KB buffer
 * and copies the plaintext into the buffer `onread` gives (no allocation per read, as for
 * plain TCP). A TLS connection is destroyed, and `onFailure` called, when the server picks
 * another protocol (or none, where `alpn` is required) or the handshake takes longer than
 * TLS_HANDSHAKE_TIMEOUT_MS: destroyed at once, so nothing written before the handshake (an
 * HTTP/2 preface, a request and its credentials) reaches a server that did not agree to it.
 */
export function connectSocket(
  target: SocketTarget,
  alpn: 'h2' | 'http/1.1',
  onread: SocketReads,
  onFailure: (error: Error) => void,
): net.Socket {
  const { host, port, tls, sessions } = target;
  if (tls === undefined) return net.connect({ host, port, noDelay: true, onread });
  // tls.connect takes net's `onread` (node's tls documentation); @types/node does not list it.
  const options: nodeTls.ConnectionOptions & { onread: SocketReads } = {
    host,
    port,
    ...tlsConnectionOptions(host, tls),
    ...(sessions?.session !== undefined ? { session: sessions.session } : {}),
    ALPNProtocols: [alpn],
    onread,
  };
  const socket = nodeTls.connect(options);
  socket.setNoDelay(true); // reaches the TCP handle under TLS
  const refuse = (error: Error): void => {
    socket.destroy();
    onFailure(error);
  };
  const timer = setTimeout(() => {
    refuse(new Error(`the TLS handshake did not finish within ${TLS_HANDSHAKE_TIMEOUT_MS / 1000} s`));
  }, TLS_HANDSHAKE_TIMEOUT_MS);
  timer.unref();
  socket.once('close', () => {
    clearTimeout(timer);
  });
  if (sessions !== undefined) {
    socket.on('session', (session: Buffer) => {
      sessions.session = session;
    });
  }
  socket.once('secureConnect', () => {
    clearTimeout(timer);
    const chosen = socket.alpnProtocol;
    // HTTP/2 over TLS requires ALPN (RFC 9113 3.2); an HTTP/1.1 server may not speak ALPN at all.
    if (chosen === alpn || (alpn === 'http/1.1' && chosen === false)) return;
    refuse(new Error(`the server did not accept ${alpn} in the TLS handshake (ALPN: ${chosen || 'none'})`));
  });
  return socket;
}
