import type { IncomingHttpHeaders } from 'node:http2';

/**
 * One gRPC call's HTTP/2 stream as the gRPC server sees it, whatever HTTP/2 carries it
 * (node:http2, or this server's own in h2/). A unary call reads its request message through
 * it and answers through it exactly once (respond / respondStatus); a streaming call reads
 * messages as they come and answers with sendHeaders, sendMessage…, endWithStatus.
 */
export interface GrpcCallStream {
  /** The request headers (gRPC metadata); names lower case. */
  readonly headers: IncomingHttpHeaders;
  /** The connection's socket (a TLSSocket over TLS), for the client certificate. */
  readonly socket: unknown;
  /**
   * Starts delivering the request body: `onData` for each piece as it arrives (a view valid
   * only during the call), then `onEnd` when the client has ended its side. Called at most
   * once, synchronously when the stream is handed over (bytes that arrive with no reader
   * are dropped).
   *
   * `into`, when given, says where the next body bytes belong (the room left in the message
   * being read, or undefined): a transport that can read its socket straight into that room
   * may do so, and those bytes then reach `onData` as a view of that very room (same buffer,
   * same offset), so the reader keeps them without a copy. Others ignore it.
   */
  read(onData: (chunk: Buffer) => void, onEnd: () => void, into?: () => Uint8Array | undefined): void;
  /**
   * Runs `fn` once the transport holds no reference to the room `into` gave it (at once when
   * it holds none): a socket keeps its next read's buffer until that read happens, so memory
   * reserved for an abandoned message is released only then. Absent: it never holds one.
   */
  afterRoomReleased?(fn: () => void): void;
  /** Stops delivering the request body; the rest of it is read and dropped. */
  stopReading(): void;
  /**
   * Answers OK: response headers, `prefix` and `chunks` as the DATA (the chunks are written
   * as they are; they must stay unchanged until the stream closes), then OK trailers.
   */
  respond(prefix: Uint8Array, chunks: readonly Uint8Array[], length: number): void;
  /** Answers a status: trailers-only (as no response was sent before). */
  respondStatus(code: number, message: string): void;
  /**
   * Streaming responses (a server- or bidirectional-streaming method): the response headers,
   * sent once before the first message.
   */
  sendHeaders(): void;
  /**
   * One response message of a streaming call (after sendHeaders): `prefix` and `chunks` as
   * DATA, sent as the client's windows allow; the chunks must stay unchanged until the
   * stream closes.
   */
  sendMessage(prefix: Uint8Array, chunks: readonly Uint8Array[], length: number): void;
  /** Ends a streaming call whose headers were sent: its status as trailers, after the queued messages. */
  endWithStatus(code: number, message: string): void;
  /**
   * Flow control of the request side: while paused the client's stream window is not given
   * back, so it stops sending once it has used it (the bytes already sent are still delivered).
   */
  pauseReading(): void;
  /**
   * The call is admitted: the client may send the rest of its request at full speed. A
   * transport may hold a new stream to a small window until then, so that a call refused on
   * its message's head costs little of its message; `needed` (default: unknown) is how many
   * request bytes are still to come. Absent: the transport holds nothing back.
   */
  openWindow?(needed?: number): void;
  resumeReading(): void;
  /** Answers a request that is not gRPC with HTTP 415 and NOT_GRPC_TEXT as a text/plain body. */
  respondUnsupported(): void;
  /** Whether an answer can still be sent (the stream is not reset or gone). */
  readonly writable: boolean;
  /**
   * Sets the function called once when the stream has closed: the answer's bytes have all
   * been handed to the socket, or the stream was reset or its connection lost.
   */
  onClose(listener: () => void): void;
}

/** The body of the HTTP 415 answer to a request that is not gRPC (curl, a browser, a probe). */
export const NOT_GRPC_TEXT =
  'This port serves gRPC: send POST requests with content-type application/grpc. HTTP/JSON APIs are on the REST port.\n';
