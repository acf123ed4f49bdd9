import { connect, constants } from 'node:http2';
import type { ClientHttp2Session, IncomingHttpHeaders, IncomingHttpStatusHeader } from 'node:http2';
import { Code, ServingError } from '@visionserve/protocol';
import { abortReason } from './call-options.js';
import { type ClientTlsOptions, hostOf, serverUrl, tlsConnectionOptions, usesTls } from './client-tls.js';
import type { GrpcChannel } from './grpc-channel-types.js';
import { createResponseReceiver } from './grpc-response-receiver.js';
import { codeOfHttpStatus, grpcStatusFrom, unaryOutcome } from './grpc-status.js';
import { createH2GrpcChannel } from './h2-grpc-channel.js';

export type { GrpcChannel, UnaryCallOptions } from './grpc-channel-types.js';

export interface GrpcChannelOptions {
  /** "host:port", "http://host:port" or "https://host:port" (TLS; so is "host:port" with `tls`). */
  readonly address: string;
  /** TLS settings: a private CA, a client certificate (ClientTlsOptions). */
  readonly tls?: ClientTlsOptions;
  /** Largest accepted response message in bytes. Default 2 GiB - 1 (no practical limit). */
  readonly maxReceiveBytes?: number;
  /**
   * SETTINGS_MAX_FRAME_SIZE this client advertises: the largest DATA frame a server may send
   * it, in bytes, 16384 to 16777215. Default GRPC_MAX_FRAME_BYTES.
   */
  readonly maxFrameBytes?: number;
  /**
   * The HTTP/2 implementation: 'lean', the client's own (h2-grpc-channel.ts: a large response
   * is read from the socket straight into the buffer its tensors view), or 'node', node:http2.
   * Default 'lean'.
   */
  readonly transport?: GrpcClientTransport;
}

/** Which HTTP/2 implementation a gRPC channel runs on (GrpcChannelOptions.transport). */
export type GrpcClientTransport = 'lean' | 'node';

/**
 * HTTP/2 receive window (per stream and for the connection) this client advertises, in bytes:
 * the most response bytes a server can have sent that this client has not read yet.
 *
 * Node's Http2Session stops reading its socket while a write of its own is still on the
 * socket. Against a Node server (ours before 1 MiB windows, or any other) that does the same,
 * both peers could stop reading at once, each waiting on the other's full socket buffers
 * (seen with 64 concurrent 2 MB requests and a 64 MiB window). A window below what the kernel
 * buffers hold (≈3.8 MB on loopback from a cold start) lets the server's writes always
 * complete, so the server keeps reading what we send. The server's own window (1 MiB) bounds
 * our writes the same way.
 */
export const GRPC_RECEIVE_WINDOW_BYTES = 1024 * 1024;

/**
 * The default SETTINGS_MAX_FRAME_SIZE this client advertises, in bytes (the protocol's default
 * is 16 KiB, which is all node:http2 servers ever send). Node hands every DATA frame to
 * JavaScript as its own chunk, so a 34 MB response in 16 KiB frames costs ~2,100 chunks. From
 * a server that sends frames as large as allowed (visionserve's own HTTP/2, gRPC C-core), 1 MiB
 * frames took ~10 ms less client CPU and 5-15 ms less latency per 34 MB answer (raw detector,
 * `visionserve bench`). Frames never exceed the receive window, so a larger value buys nothing.
 */
export const GRPC_MAX_FRAME_BYTES = 1024 * 1024;

/** Request bytes before the first large part that are copied together with the length prefix. */
const COALESCE_BYTES = 64 * 1024;

/**
 * Writes the length-prefixed message and ends the request in one turn of the event loop:
 * the prefix and the small parts before the first large one (or the whole message, when
 * small) as one buffer, large parts as they are, corked into one writev. Separate writes
 * would each wait for the previous one to reach the socket, and the prefix would travel
 * alone in its own DATA frame.
 */
function writeRequestMessage(
  stream: { write(chunk: Uint8Array): boolean; end(chunk?: Uint8Array): void; cork(): void },
  parts: readonly Uint8Array[],
  length: number,
): void {
  let first = 0;
  let headLength = 5;
  while (first < parts.length && parts[first]!.byteLength <= COALESCE_BYTES - headLength) {
    headLength += parts[first]!.byteLength;
    first++;
  }
  const head = Buffer.allocUnsafe(headLength);
  head[0] = 0;
  head.writeUInt32BE(length, 1);
  let at = 5;
  for (let i = 0; i < first; i++) {
    head.set(parts[i]!, at);
    at += parts[i]!.byteLength;
  }
  if (first === parts.length) {
    stream.end(head);
    return;
  }
  stream.cork();
  stream.write(head);
  for (let i = first; i < parts.length; i++) if (parts[i]!.byteLength > 0) stream.write(parts[i]!);
  stream.end();
}

export function createGrpcChannel(options: GrpcChannelOptions): GrpcChannel {
  if (options.transport !== 'node') return createH2GrpcChannel(options);
  const url = serverUrl(options.address, options.tls, 'gRPC address');
  const secure = usesTls(url, options.tls, `gRPC address ${options.address}`);
  const authority = url.origin;
  const tlsOptions = secure ? tlsConnectionOptions(hostOf(url), options.tls) : {};
  const maxReceive = options.maxReceiveBytes ?? 2 ** 31 - 1;
  let session: ClientHttp2Session | undefined;
  // The connection keeps the process alive only while calls are in flight.
  let inFlight = 0;

  const getSession = (): ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    // maxSessionMemory (MiB): node's default of 10 refuses new streams once ~10 MB of
    // responses are buffered on the connection (NGHTTP2_ENHANCE_YOUR_CALM), which
    // concurrent large detector outputs reach.
    const s = connect(authority, {
      ...tlsOptions,
      maxSessionMemory: 1024,
      settings: {
        initialWindowSize: GRPC_RECEIVE_WINDOW_BYTES,
        maxFrameSize: options.maxFrameBytes ?? GRPC_MAX_FRAME_BYTES,
      },
    });
    s.on('error', () => {
      // Surfaced per call through the stream's error event.
    });
    s.on('connect', (_session, socket) => {
      // node:http2 takes a TLS session without ALPN; HTTP/2 over TLS needs h2 (RFC 9113 3.2).
      if (secure && (socket as { alpnProtocol?: string | false }).alpnProtocol !== 'h2') {
        s.destroy(new Error('the server did not accept h2 in the TLS handshake'));
        return;
      }
      s.setLocalWindowSize(GRPC_RECEIVE_WINDOW_BYTES);
    });
    if (inFlight === 0) s.unref();
    session = s;
    return s;
  };
  const callStarted = (s: ClientHttp2Session): void => {
    if (inFlight++ === 0) s.ref();
  };
  const callEnded = (): void => {
    if (--inFlight === 0) session?.unref();
  };

  return {
    unary(path, request, callOptions = {}) {
      return new Promise<Uint8Array>((resolve, reject) => {
        if (callOptions.signal?.aborted) {
          reject(abortReason(callOptions.signal));
          return;
        }
        const headers: Record<string, string> = {
          [constants.HTTP2_HEADER_METHOD]: 'POST',
          [constants.HTTP2_HEADER_PATH]: path,
          'content-type': 'application/grpc+proto',
          te: 'trailers',
          ...callOptions.metadata,
        };
        if (callOptions.timeoutMs !== undefined)
          headers['grpc-timeout'] = `${Math.max(1, Math.ceil(callOptions.timeoutMs))}m`;
        let stream;
        let s: ClientHttp2Session;
        try {
          s = getSession();
          stream = s.request(headers);
        } catch (error) {
          reject(new ServingError(Code.UNAVAILABLE, `Connection failed: ${String(error)}`));
          return;
        }
        callStarted(s);
        const receiver = createResponseReceiver({
          maxReceiveBytes: maxReceive,
          ...(callOptions.responsePadding ? { responsePadding: callOptions.responsePadding } : {}),
        });
        let status: { code: Code; message: string } | undefined;
        let done = false;
        const finish = (error?: ServingError): void => {
          if (done) return;
          done = true;
          callEnded();
          if (deadline !== undefined) clearTimeout(deadline);
          callOptions.signal?.removeEventListener('abort', onAbort);
          const outcome = error ?? unaryOutcome(status, () => receiver.end());
          if (outcome instanceof ServingError) reject(outcome);
          else resolve(outcome);
        };
        const onAbort = (): void => {
          stream.close(constants.NGHTTP2_CANCEL);
          finish(abortReason(callOptions.signal!));
        };
        callOptions.signal?.addEventListener('abort', onAbort, { once: true });
        const timeoutMs = callOptions.timeoutMs;
        const deadline =
          timeoutMs === undefined
            ? undefined
            : setTimeout(() => {
                stream.close(constants.NGHTTP2_CANCEL);
                finish(new ServingError(Code.DEADLINE_EXCEEDED, `Deadline of ${timeoutMs} ms exceeded`));
              }, timeoutMs);
        stream.on('response', (h: IncomingHttpHeaders & IncomingHttpStatusHeader) => {
          status = grpcStatusFrom(h) ?? status;
          if (h[':status'] !== 200) {
            finish(
              new ServingError(
                codeOfHttpStatus(h[':status']),
                `HTTP status ${String(h[':status'])} from gRPC endpoint`,
              ),
            );
          }
        });
        stream.on('trailers', (h: IncomingHttpHeaders) => {
          status = grpcStatusFrom(h) ?? status;
        });
        stream.on('data', (chunk: Buffer) => {
          if (done) return;
          const error = receiver.push(chunk);
          if (error) {
            stream.close(constants.NGHTTP2_CANCEL);
            finish(error);
          }
        });
        stream.on('end', () => {
          finish();
        });
        stream.on('error', (error: Error) => {
          finish(new ServingError(Code.UNAVAILABLE, `Stream failed: ${error.message}`));
        });
        stream.on('close', () => {
          // A stream reset by the peer ends without 'end' or 'error'.
          finish(new ServingError(Code.UNAVAILABLE, 'Stream closed before the call completed'));
        });
        const parts = request instanceof Uint8Array ? [request] : request;
        let length = 0;
        for (const part of parts) length += part.byteLength;
        writeRequestMessage(stream, parts, length);
      });
    },
    close() {
      session?.close();
      session = undefined;
    },
  };
}
