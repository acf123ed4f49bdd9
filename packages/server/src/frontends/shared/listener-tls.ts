import type { SecureContextOptions, TLSSocket, TlsOptions } from 'node:tls';

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

/** Buffers at least this large are written on their own by writeTlsBatchesWithoutCopy. */
const OWN_WRITE_MIN_BYTES = 64 * 1024;

type WritevChunk = { chunk: Uint8Array | string; encoding: BufferEncoding };
type WriteFn = (
  chunk: Uint8Array,
  encoding: BufferEncoding | 'buffer',
  callback: (error?: Error | null) => void,
) => void;

/**
 * Node's TLS socket copies every batch of several buffers (a corked write, `_writev`) into one
 * new, zero-filled buffer before it encrypts it (TLSWrap::DoWrite). An answer written as frame
 * headers and views of a 36 MB tensor paid that copy in full: a bare node:tls server writing
 * 36 MB as 72 corked buffers spent 60-70 ms of CPU against 28-31 ms written as single buffers
 * (this VM). So a listener's TLS sockets get their own `_writev`: runs of small buffers are
 * joined (what node would do, cheap for them), buffers of OWN_WRITE_MIN_BYTES or more are
 * written on their own, one write after another (TLSWrap takes one write at a time), each
 * encrypted straight from the caller's memory. Small answers still leave in one write.
 */
export function writeTlsBatchesWithoutCopy(socket: TLSSocket): void {
  const writable = socket as unknown as { _write: WriteFn; _writev: unknown };
  const write = writable._write.bind(socket);
  writable._writev = (chunks: WritevChunk[], callback: (error?: Error | null) => void): void => {
    const pieces: Uint8Array[] = [];
    let run: Uint8Array[] = [];
    let runBytes = 0;
    const endRun = (): void => {
      if (run.length === 1) pieces.push(run[0]!);
      else if (run.length > 1) pieces.push(Buffer.concat(run, runBytes));
      run = [];
      runBytes = 0;
    };
    for (const { chunk, encoding } of chunks) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk;
      // node:http ends a response with an empty write: it would be a TLS write of its own.
      if (bytes.byteLength === 0) continue;
      if (bytes.byteLength >= OWN_WRITE_MIN_BYTES) {
        endRun();
        pieces.push(bytes);
      } else {
        run.push(bytes);
        runBytes += bytes.byteLength;
      }
    }
    endRun();
    let next = 0;
    const writeNext = (error?: Error | null): void => {
      if (error) {
        callback(error);
        return;
      }
      if (next === pieces.length) {
        callback();
        return;
      }
      write(pieces[next++]!, 'buffer', writeNext);
    };
    writeNext();
  };
}
