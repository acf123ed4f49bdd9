/**
 * The unary gRPC channel on the client's own HTTP/2 connection (h2-client-connection.ts):
 * deadlines (`grpc-timeout` and a local timer), cancellation (RST_STREAM CANCEL), the gRPC
 * status from headers or trailers, and a new connection once the current one goes away.
 * The response message is received into its final buffer (grpc-message-assembler.ts).
 */
import { Code, ServingError } from '@visionserve/protocol';
import { abortReason } from './call-options.js';
import { type ClientTlsOptions, type TlsSessionCache, hostOf, serverUrl, usesTls } from './client-tls.js';
import type { GrpcChannel, UnaryCallOptions } from './grpc-channel-types.js';
import { createMessageAssembler } from './grpc-message-assembler.js';
import { codeOfHttpStatus, grpcStatusFrom, unaryOutcome } from './grpc-status.js';
import {
  type ClientStream,
  type ClientStreamHandler,
  H2ClientConnection,
  type H2Connector,
  NOT_PROCESSED,
} from './h2-client-connection.js';

export interface H2GrpcChannelOptions {
  /** "host:port", "http://host:port" or "https://host:port" (TLS; so is "host:port" with `tls`). */
  readonly address: string;
  /** TLS settings: a private CA, a client certificate (ClientTlsOptions). */
  readonly tls?: ClientTlsOptions;
  /** Largest accepted response message in bytes. Default 2 GiB - 1 (no practical limit). */
  readonly maxReceiveBytes?: number;
  /** SETTINGS_MAX_FRAME_SIZE advertised, bytes, 16384 to 16777215. Default 1 MiB. */
  readonly maxFrameBytes?: number;
  /** Receive window per stream and for the connection, bytes. Default H2_RECEIVE_WINDOW_BYTES. */
  readonly windowBytes?: number;
  /** A server's first SETTINGS must arrive within this, ms (else its calls fail UNAVAILABLE). Default 20000. */
  readonly handshakeTimeoutMs?: number;
  /** Opens each connection's socket instead of TCP/TLS to the address (the client fuzz target's in-process server). */
  readonly connect?: H2Connector;
}

/**
 * Receive window this channel advertises per stream and for the connection, in bytes. This
 * client always reads its socket, so a window above the kernel's socket buffers cannot stall
 * a peer that stops reading while it writes (node:http2 does); a larger window only lets a
 * server send further ahead of the client.
 */
export const H2_RECEIVE_WINDOW_BYTES = 16 * 1024 * 1024;

/** Largest response header list accepted, bytes (SETTINGS_MAX_HEADER_LIST_SIZE). */
const MAX_HEADER_LIST_BYTES = 64 * 1024;

function parseAddress(
  address: string,
  tls: ClientTlsOptions | undefined,
): { host: string; port: number; secure: boolean; authority: string } {
  const url = serverUrl(address, tls, 'gRPC address');
  const secure = usesTls(url, tls, `gRPC address ${address}`);
  const port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
  // URL's host is the :authority: IPv6 in brackets, the scheme's default port left out.
  return { host: hostOf(url), port, secure, authority: url.host };
}

/** A unary call's request headers: the pseudo-headers, gRPC's, the deadline and the metadata. */
function requestHeaders(
  path: string,
  scheme: 'http' | 'https',
  authority: string,
  callOptions: UnaryCallOptions,
): [string, string][] {
  const headers: [string, string][] = [
    [':method', 'POST'],
    [':scheme', scheme],
    [':path', path],
    [':authority', authority],
    ['content-type', 'application/grpc+proto'],
    ['te', 'trailers'],
  ];
  if (callOptions.timeoutMs !== undefined)
    headers.push(['grpc-timeout', `${Math.max(1, Math.ceil(callOptions.timeoutMs))}m`]);
  for (const [name, value] of Object.entries(callOptions.metadata ?? {}))
    headers.push([name.toLowerCase(), value]);
  return headers;
}

/** gRPC's 5-byte message prefix (uncompressed, big-endian length) for a message in `parts`. */
function messagePrefix(parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.byteLength;
  const prefix = new Uint8Array(5);
  new DataView(prefix.buffer).setUint32(1, length);
  return prefix;
}

export function createH2GrpcChannel(options: H2GrpcChannelOptions): GrpcChannel {
  // A bad address or TLS options on http:// throw here (INVALID_ARGUMENT), as the node:http2
  // channel does: a mistake in the configuration, not a call that fails later.
  const { host, port, secure, authority } = parseAddress(options.address, options.tls);
  const sessions: TlsSessionCache = { session: undefined };
  const maxReceive = options.maxReceiveBytes ?? 2 ** 31 - 1;
  let connection: H2ClientConnection | undefined;
  /** Every connection not yet ended, draining ones included: close() ends them all. */
  const live = new Set<H2ClientConnection>();

  const getConnection = (): H2ClientConnection => {
    if (connection?.usable) return connection;
    const created: H2ClientConnection = new H2ClientConnection({
      host,
      port,
      tls: secure ? (options.tls ?? {}) : undefined,
      sessions,
      windowBytes: options.windowBytes ?? H2_RECEIVE_WINDOW_BYTES,
      maxFrameBytes: options.maxFrameBytes ?? 1024 * 1024,
      maxHeaderListBytes: MAX_HEADER_LIST_BYTES,
      ...(options.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: options.handshakeTimeoutMs }),
      connect: options.connect,
      onDrain: () => {
        if (connection === created) connection = undefined;
      },
      onClosed: () => {
        live.delete(created);
      },
    });
    live.add(created);
    connection = created;
    return created;
  };

  return {
    unary(path, request, callOptions = {}) {
      return new Promise<Uint8Array>((resolve, reject) => {
        if (callOptions.signal?.aborted) {
          reject(abortReason(callOptions.signal));
          return;
        }
        const headers = requestHeaders(path, secure ? 'https' : 'http', authority, callOptions);
        const parts = request instanceof Uint8Array ? [request] : request;
        const prefix = messagePrefix(parts);

        const assembler = createMessageAssembler({
          maxReceiveBytes: maxReceive,
          ...(callOptions.responsePadding ? { responsePadding: callOptions.responsePadding } : {}),
        });
        let status: { code: Code; message: string } | undefined;
        let done = false;
        let stream: ClientStream | undefined;
        const finish = (error?: ServingError): void => {
          if (done) return;
          done = true;
          if (deadline !== undefined) clearTimeout(deadline);
          callOptions.signal?.removeEventListener('abort', onAbort);
          const outcome = error ?? unaryOutcome(status, () => assembler.end());
          if (outcome instanceof ServingError) reject(outcome);
          else resolve(outcome);
        };
        const cancel = (error: ServingError): void => {
          stream?.cancel();
          finish(error);
        };
        const onAbort = (): void => {
          cancel(abortReason(callOptions.signal!));
        };
        const timeoutMs = callOptions.timeoutMs;
        const deadline =
          timeoutMs === undefined
            ? undefined
            : setTimeout(() => {
                cancel(new ServingError(Code.DEADLINE_EXCEEDED, `Deadline of ${timeoutMs} ms exceeded`));
              }, timeoutMs);
        callOptions.signal?.addEventListener('abort', onAbort, { once: true });
        let sawHeaders = false;
        let resent = false;
        const send = (): void => {
          stream = getConnection().open(headers, [prefix, ...parts], handler, resent);
        };
        // A call the server never processed (refused, above a GOAWAY's last stream id, or not
        // sent before the connection went away) is sent once more on a new connection, within
        // its deadline, as gRPC clients do.
        const onError = (error: ServingError): void => {
          if (!done && !resent && NOT_PROCESSED.has(error)) {
            resent = true;
            try {
              send();
              return;
            } catch {
              // The first error stands.
            }
          }
          finish(error);
        };
        const handler: ClientStreamHandler = {
          assembler,
          onHeaders(fields, endStream) {
            status = grpcStatusFrom(fields) ?? status;
            if (!sawHeaders) {
              sawHeaders = true;
              if (fields[':status'] !== '200') {
                if (!endStream) stream?.cancel();
                finish(
                  new ServingError(
                    codeOfHttpStatus(fields[':status']),
                    `HTTP status ${fields[':status'] ?? '(none)'} from gRPC endpoint`,
                  ),
                );
                return;
              }
            }
            if (endStream) finish();
          },
          onDataError: finish,
          onEnd: () => {
            finish();
          },
          onError,
        };
        try {
          send();
        } catch (error) {
          finish(
            error instanceof ServingError
              ? error
              : error instanceof RangeError
                ? new ServingError(Code.INVALID_ARGUMENT, `Bad request metadata: ${error.message}`)
                : new ServingError(Code.UNAVAILABLE, `Connection failed: ${String(error)}`),
          );
        }
      });
    },
    close() {
      for (const c of [...live]) c.close();
      live.clear();
      connection = undefined;
    },
  };
}
