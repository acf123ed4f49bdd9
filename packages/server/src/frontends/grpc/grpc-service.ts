import type { IncomingHttpHeaders } from 'node:http2';
import type { BodyArrival } from '../../core/inference-service.js';
import type { OutputLease } from '../../core/session.js';
import type { ManagementCredentials } from '../shared/management-guard.js';

/** What a unary handler knows of its call besides the request message. */
export interface GrpcCallContext {
  /**
   * Aborted when the deadline passes (reason: ServingError DEADLINE_EXCEEDED) or the
   * client cancels or goes away (reason: ServingError CANCELLED). Pass it to core.
   */
  readonly signal: AbortSignal;
  /** Absolute deadline (Date.now() clock, ms) from `grpc-timeout`; undefined when none was sent. */
  readonly deadline: number | undefined;
  /** The request headers (gRPC metadata; binary `-bin` values still base64). */
  readonly metadata: IncomingHttpHeaders;
  /**
   * The ArrayBuffer the request message was read into. It belongs to this call alone, so
   * views into it may be handed to the runtime wholesale (moved to a worker, not copied).
   */
  readonly messageBuffer: ArrayBuffer;
  /**
   * Released by the transport when the call's stream has closed (the response is on the
   * socket, or the call failed): outputs handed to core with it may live in pooled memory
   * that the response's chunks view until then (see RunOptions.lease). Absent: outputs are
   * the handler's to keep (transports that do not track when their writes are done).
   */
  readonly outputLease?: OutputLease | undefined;
  /** The caller's token (`authorization` metadata) and client certificate, for a ManagementGuard. */
  credentials(): ManagementCredentials;
}

/**
 * A unary method: the request message's bytes in, the response message out as chunks
 * whose concatenation is the serialized message (so large tensors are written as views,
 * never copied into one buffer). Throw or reject with a ServingError for a gRPC status;
 * anything else is answered INTERNAL "Internal error" and logged.
 */
export type UnaryHandler = (request: Uint8Array, context: GrpcCallContext) => Promise<readonly Uint8Array[]>;

/**
 * Where the bytes of the request message's first large `bytes` field start, relative to
 * the message, when a decoder can tell from the message's first bytes (undefined when it
 * cannot). The transport places the message so that this field is 8-byte aligned, so that
 * numeric tensors decode as views instead of aligned copies.
 */
export type AlignmentProbe = (head: Uint8Array) => number | undefined;

/**
 * Admission on the head of the request message (the bytes the alignment probe sees), before
 * the rest is read: throw a ServingError (UNAVAILABLE when the model it names is overloaded)
 * to refuse the call without buffering its message. A returned function is called when
 * the call ends.
 */
export type HeadAdmission = (
  head: Uint8Array,
  call: {
    readonly signal: AbortSignal;
    readonly deadline: number | undefined;
    /** The message on its way (bytes received of its length), for admission to count. */
    readonly body: BodyArrival;
  },
) => (() => void) | undefined;

/** A streaming call as its handler sees it (client- and bidirectional streaming). */
export interface GrpcStreamCall {
  /** Aborted when the deadline passes or the client cancels or goes away (see GrpcCallContext). */
  readonly signal: AbortSignal;
  readonly deadline: number | undefined;
  readonly metadata: IncomingHttpHeaders;
  credentials(): ManagementCredentials;
  /** Sends one response message (chunks whose concatenation is the serialized message). */
  send(chunks: readonly Uint8Array[]): void;
  /** Stops / restarts reading request messages: HTTP/2 flow control then holds the client back. */
  pause(): void;
  resume(): void;
  /** Ends the call: status OK without an error, else the error's status (as unary handlers throw them). */
  end(error?: unknown): void;
}

/** What a streaming handler is told: each request message (its own copy), then the client's end. */
export interface GrpcStreamEvents {
  onMessage(message: Uint8Array): void;
  onEnd(): void;
}

/** A streaming method: called once per call, when its headers have passed the checks. */
export type StreamHandler = (call: GrpcStreamCall) => GrpcStreamEvents;

export interface GrpcMethod {
  /** The unary method; for a streaming one, what a unary-only carrier (gRPC-web) answers. */
  readonly handler: UnaryHandler;
  readonly alignment?: AlignmentProbe;
  readonly admit?: HeadAdmission;
  /** Set for a streaming method: the gRPC server calls it instead of `handler`. */
  readonly stream?: StreamHandler;
  /** A streaming method's largest request message, when below the server's (RESOURCE_EXHAUSTED above). */
  readonly maxMessageBytes?: number;
}

/** One gRPC service: its full name (`package.Service`) and its methods by name. */
export interface GrpcService {
  readonly name: string;
  /** The API name in metrics and logs, e.g. "tfs-grpc". Default: `name`. */
  readonly api?: string;
  readonly methods: Readonly<Record<string, GrpcMethod>>;
}
