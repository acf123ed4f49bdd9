/**
 * A call's stream on node:http2 (the `grpcTransport: 'node'` transport): a ServerHttp2Stream
 * behind GrpcCallStream.
 */
import http2 from 'node:http2';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { NOT_GRPC_TEXT } from './call-stream.js';
import type { GrpcCallStream } from './call-stream.js';

/** Bytes of a refused request message still read and dropped before its stream is reset. */
export const DRAIN_REFUSED_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * Bytes of a response message copied together with its length prefix and sent as one write.
 * Each separate `write` on an HTTP/2 stream waits for the previous one to reach the socket (an
 * event-loop turn each); copying up to this much costs a few microseconds.
 */
export const COALESCE_BYTES = 64 * 1024;

/**
 * Writes one length-prefixed message and ends the stream's data in a single turn of the
 * event loop: a message up to COALESCE_BYTES as one buffer; a larger one as the prefix merged
 * with the small chunks before its first large one, then the chunks as they are (tensor bytes
 * are not copied), corked so that the stream hands them to HTTP/2 in one writev.
 */
export function writeMessage(
  stream: { write(chunk: Uint8Array): unknown; end(chunk?: Uint8Array): unknown; cork(): void },
  prefix: Uint8Array,
  chunks: readonly Uint8Array[],
  length: number,
): void {
  if (length <= COALESCE_BYTES) {
    const out = Buffer.allocUnsafe(prefix.byteLength + length);
    out.set(prefix, 0);
    let at = prefix.byteLength;
    for (const c of chunks) {
      out.set(c, at);
      at += c.byteLength;
    }
    stream.end(out);
    return;
  }
  let first = 0;
  let headLength = prefix.byteLength;
  while (first < chunks.length && chunks[first]!.byteLength < COALESCE_BYTES - headLength) {
    headLength += chunks[first]!.byteLength;
    first++;
  }
  const head = Buffer.allocUnsafe(headLength);
  head.set(prefix, 0);
  let at = prefix.byteLength;
  for (let i = 0; i < first; i++) {
    head.set(chunks[i]!, at);
    at += chunks[i]!.byteLength;
  }
  stream.cork();
  stream.write(head);
  for (let i = first; i < chunks.length; i++) {
    const c = chunks[i]!;
    if (c.byteLength > 0) stream.write(c);
  }
  // end() uncorks: the chunks go to the stream's writev together.
  stream.end();
}

export class NodeCallStream implements GrpcCallStream {
  private onData: ((chunk: Buffer) => void) | undefined;
  private onEnd: (() => void) | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    readonly headers: IncomingHttpHeaders,
    /** A response that makes no progress for this long is reset (CANCEL), ms; 0: never. */
    private readonly sendStallMs = 0,
  ) {}

  get socket(): unknown {
    return this.stream.session?.socket;
  }

  get writable(): boolean {
    return !this.stream.destroyed && !this.stream.closed;
  }

  read(onData: (chunk: Buffer) => void, onEnd: () => void): void {
    this.onData = onData;
    this.onEnd = onEnd;
    this.stream.on('data', onData);
    this.stream.on('end', onEnd);
  }

  stopReading(): void {
    if (this.onData !== undefined) this.stream.off('data', this.onData);
    if (this.onEnd !== undefined) this.stream.off('end', this.onEnd);
    this.onData = this.onEnd = undefined;
  }

  respond(prefix: Uint8Array, chunks: readonly Uint8Array[], length: number): void {
    const { stream } = this;
    stream.respond(
      {
        ':status': 200,
        'content-type': 'application/grpc',
        'grpc-accept-encoding': 'identity, gzip, deflate',
      },
      { waitForTrailers: true },
    );
    stream.once('wantTrailers', () => {
      stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': '' });
    });
    writeMessage(stream, prefix, chunks, length);
    if (this.sendStallMs > 0) this.watchSendStall();
  }

  /**
   * Resets the stream (CANCEL) when its response makes no progress for sendStallMs: a client
   * whose flow control never lets it through (a window of 0, a client that stopped reading)
   * would otherwise hold the call, its admission bytes and lent output memory for ever.
   * Progress is the stream's unsent bytes going down; done is the stream closing.
   */
  private watchSendStall(): void {
    const { stream } = this;
    let unsent = Number.POSITIVE_INFINITY;
    let since = Date.now();
    const timer = setInterval(
      () => {
        if (stream.closed || stream.destroyed) {
          clearInterval(timer);
          return;
        }
        const now = stream.writableLength;
        if (now < unsent) {
          unsent = now;
          since = Date.now();
        } else if (Date.now() - since >= this.sendStallMs) {
          clearInterval(timer);
          stream.close(http2.constants.NGHTTP2_CANCEL);
        }
      },
      Math.max(25, this.sendStallMs / 4),
    );
    timer.unref();
    stream.once('close', () => {
      clearInterval(timer);
    });
  }

  respondStatus(code: number, message: string): void {
    const { stream } = this;
    const trailers = { 'grpc-status': String(code), 'grpc-message': message };
    if (!stream.headersSent) {
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', ...trailers },
        { endStream: true },
      );
    } else {
      stream.end();
      stream.once('wantTrailers', () => {
        stream.sendTrailers(trailers);
      });
    }
    // A client may still be sending a message we refused. Its DATA is read and dropped, up to
    // DRAIN_REFUSED_MESSAGE_BYTES, so that the connection's receive window keeps being given
    // back: with a reset instead (RST_STREAM NO_ERROR), the DATA already in flight is not
    // returned to the 1 MiB connection window, and under sustained refusals the connection
    // stalled (overload bench: RST_STREAM ENHANCE_YOUR_CALM and calls without status). Past
    // that the stream is reset and the connection retired with GOAWAY (the client reconnects).
    if (!stream.readableEnded) {
      let dropped = 0;
      stream.on('data', (chunk: Buffer) => {
        dropped += chunk.byteLength;
        if (dropped > DRAIN_REFUSED_MESSAGE_BYTES && !stream.closed) {
          stream.close(http2.constants.NGHTTP2_NO_ERROR);
          if (!stream.session?.closed) stream.session?.close();
        }
      });
      stream.resume();
    }
  }

  /** Trailers of a streaming call, sent when node asks for them (after its last DATA). */
  private trailers: { 'grpc-status': string; 'grpc-message': string } = {
    'grpc-status': '0',
    'grpc-message': '',
  };

  sendHeaders(): void {
    const { stream } = this;
    if (stream.headersSent) return;
    stream.respond(
      {
        ':status': 200,
        'content-type': 'application/grpc',
        'grpc-accept-encoding': 'identity, gzip, deflate',
      },
      { waitForTrailers: true },
    );
    stream.once('wantTrailers', () => {
      stream.sendTrailers(this.trailers);
    });
  }

  sendMessage(prefix: Uint8Array, chunks: readonly Uint8Array[]): void {
    const { stream } = this;
    stream.cork();
    stream.write(prefix);
    for (const c of chunks) if (c.byteLength > 0) stream.write(c);
    stream.uncork();
  }

  endWithStatus(code: number, message: string): void {
    this.trailers = { 'grpc-status': String(code), 'grpc-message': message };
    this.stream.end();
  }

  pauseReading(): void {
    this.stream.pause();
  }

  resumeReading(): void {
    this.stream.resume();
  }

  respondUnsupported(): void {
    this.stream.respond({ ':status': 415, 'content-type': 'text/plain' });
    this.stream.end(NOT_GRPC_TEXT);
  }

  onClose(listener: () => void): void {
    this.stream.once('close', listener);
  }
}
