/** The unary call interface every channel (HTTP/2 gRPC, gRPC-web) implements; no transport here. */
export interface UnaryCallOptions {
  /**
   * Deadline relative to now, in ms: sent as `grpc-timeout`, and enforced locally too
   * (the call rejects with DEADLINE_EXCEEDED even if the server never answers).
   */
  readonly timeoutMs?: number;
  /** Cancels the call (RST_STREAM CANCEL); rejects with the signal's ServingError reason or CANCELLED. */
  readonly signal?: AbortSignal;
  /** Extra request metadata (ASCII values). */
  readonly metadata?: Readonly<Record<string, string>>;
  /**
   * Where the response message goes in the buffer it is received into: given the frames
   * received so far (the message starts at byte `start` of the first) and its length, returns
   * the offset in [0, 8) of its first byte, e.g. so that its largest tensor is aligned and
   * decodes without a copy; or undefined when the part received so far does not tell yet (it
   * is asked again as more arrives, the last time with the whole message, when undefined
   * counts as 0). The offset only affects alignment, never the bytes. Default: offset 0.
   * Channels that receive the message in one piece may ignore it.
   */
  readonly responsePadding?: (
    frames: readonly Uint8Array[],
    start: number,
    length: number,
  ) => number | undefined;
}

/**
 * A minimal unary gRPC client over node:http2 (no grpc-js): one HTTP/2
 * connection, length-prefixed messages, status from trailers. It imports in
 * milliseconds and costs far less CPU per call than grpc-js.
 */
export interface GrpcChannel {
  /** One unary call; `request` is the serialized message, or chunks whose concatenation is (written without copying). */
  unary(
    path: string,
    request: Uint8Array | readonly Uint8Array[],
    options?: UnaryCallOptions,
  ): Promise<Uint8Array>;
  close(): void;
}
