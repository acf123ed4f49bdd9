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

/**
 * Whether a connection to `url` uses TLS: https:// does, http:// does not, and `tls` options
 * with an http:// URL are refused rather than silently sent in clear.
 */
export function usesTls(url: URL, options: ClientTlsOptions | undefined, what: string): boolean {
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
 * A connection to host:port, plain TCP (`tls` undefined) or TLS offering one ALPN protocol,
 * with Nagle off. Both read through `onread`: over TLS, each record is decrypted straight
 * into the buffer `onread` gives, as plain TCP reads are. A TLS server that picks another
 * protocol (or none, where `alpn` is required) fails the connection with `onWrongProtocol`'s
 * error.
 */
export function connectSocket(
  host: string,
  port: number,
  tls: ClientTlsOptions | undefined,
  alpn: 'h2' | 'http/1.1',
  onread: SocketReads,
  onWrongProtocol: (error: Error) => void,
): net.Socket {
  if (tls === undefined) return net.connect({ host, port, noDelay: true, onread });
  // tls.connect takes net's `onread` (node's tls documentation); @types/node does not list it.
  const options: nodeTls.ConnectionOptions & { onread: SocketReads } = {
    host,
    port,
    ...tlsConnectionOptions(host, tls),
    ALPNProtocols: [alpn],
    onread,
  };
  const socket = nodeTls.connect(options);
  socket.setNoDelay(true); // reaches the TCP handle under TLS
  socket.once('secureConnect', () => {
    const chosen = socket.alpnProtocol;
    // HTTP/2 over TLS requires ALPN (RFC 9113 3.2); an HTTP/1.1 server may not speak ALPN at all.
    if (chosen === alpn || (alpn === 'http/1.1' && chosen === false)) return;
    onWrongProtocol(
      new Error(`the server did not accept ${alpn} in the TLS handshake (ALPN: ${chosen || 'none'})`),
    );
  });
  return socket;
}
