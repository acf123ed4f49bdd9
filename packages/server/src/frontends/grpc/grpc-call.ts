/**
 * One gRPC call's state and the steps every call goes through, whatever its kind: the checks
 * of its headers (method, content type, message encoding), its deadline, the one answer it
 * gives (a response or a status), and its end when the stream closes (releases, the
 * observer's report, the abort of a call left unanswered).
 */
import { Code, ServingError } from '@visionserve/protocol';
import type { ReleasableOutputLease } from '../../core/output-lease.js';
import type { Reservation } from '../shared/inflight-budget.js';
import type { RequestEnd } from '../shared/request-observer.js';
import type { GrpcCallStream } from './call-stream.js';
import { encodeGrpcMessage, parseGrpcTimeout, statusOf } from './grpc-status.js';

/** Message encodings a request may use (`grpc-encoding`); "deflate" is the zlib format, as in gRPC. */
export type MessageEncoding = 'gzip' | 'deflate';
const ENCODINGS: readonly string[] = ['gzip', 'deflate'];

/** A client reset this close to the deadline counts as the deadline passing, in ms. */
const DEADLINE_SLACK_MS = 100;

export interface CallState {
  readonly stream: GrpcCallStream;
  /** Called when the call ends (the head admission's release). */
  release?: (() => void) | undefined;
  /** The request's `grpc-encoding` when it compresses messages. */
  encoding?: MessageEncoding;
  readonly controller: AbortController;
  answered: boolean;
  /** A streaming call has sent its response headers: its status goes in trailers. */
  headersSent?: boolean;
  reservation: Reservation | undefined;
  timers: NodeJS.Timeout[];
  /** Epoch ms by which the client wants its answer (grpc-timeout), if it set one. */
  deadline?: number;
  /**
   * Released when the stream has closed: every DATA frame has been handed to the socket, or
   * the stream is gone, so the pooled output memory the response viewed may be refilled.
   */
  readonly outputLease: ReleasableOutputLease;
  /** Observer hook: the status the call ended with and its message sizes. */
  code: Code;
  bytesIn: number;
  bytesOut: number;
}

export function newCall(stream: GrpcCallStream, outputLease: ReleasableOutputLease): CallState {
  return {
    stream,
    controller: new AbortController(),
    answered: false,
    reservation: undefined,
    timers: [],
    outputLease,
    code: Code.OK,
    bytesIn: 0,
    bytesOut: 0,
  };
}

/** The 5-byte gRPC length prefix of an uncompressed message of `length` bytes. */
export function messagePrefix(length: number): Buffer {
  const prefix = Buffer.allocUnsafe(5);
  prefix[0] = 0;
  prefix.writeUInt32BE(length, 1);
  return prefix;
}

/**
 * Gives the call's reserved request bytes back to the budget, once the transport no longer
 * holds the message's buffer for a read (GrpcCallStream.afterRoomReleased).
 */
export function releaseReservation(call: CallState): void {
  const reservation = call.reservation;
  if (reservation === undefined) return;
  call.reservation = undefined;
  if (call.stream.afterRoomReleased === undefined) reservation.release();
  else
    call.stream.afterRoomReleased(() => {
      reservation.release();
    });
}

/** Ends a call with a status (trailers-only: a response message is only sent with status OK). */
export function finishCall(call: CallState, error: unknown): void {
  if (call.answered) return;
  call.answered = true;
  const { code, message } = statusOf(error);
  call.code = code;
  const { stream } = call;
  stream.stopReading();
  if (!stream.writable) return;
  if (call.headersSent === true) stream.endWithStatus(code, encodeGrpcMessage(message));
  else stream.respondStatus(code, encodeGrpcMessage(message));
}

/** Answers a unary call OK with its response message (the chunks written as they are). */
export function respondCall(call: CallState, chunks: readonly Uint8Array[]): void {
  if (call.answered) return;
  call.answered = true;
  const { stream } = call;
  if (!stream.writable) return;
  let length = 0;
  for (const c of chunks) length += c.byteLength;
  call.bytesOut = length;
  stream.respond(messagePrefix(length), chunks, length);
}

/**
 * Aborts the call's work and ends it with `error` (a deadline, a request message too slow, a
 * stream message the transport refused): the handler learns it through the signal, as for a reset.
 */
export function abortCall(call: CallState, error: unknown): void {
  call.controller.abort(error);
  finishCall(call, error);
}

export function isGrpcContentType(value: string | undefined): boolean {
  return (
    value !== undefined &&
    (value === 'application/grpc' ||
      value.startsWith('application/grpc+') ||
      value.startsWith('application/grpc;'))
  );
}

/** Takes the request's `grpc-encoding`; false (the call answered UNIMPLEMENTED) for one not supported. */
export function acceptEncoding(call: CallState): boolean {
  const encoding = call.stream.headers['grpc-encoding'];
  if (encoding === undefined || encoding === 'identity') return true;
  if (typeof encoding !== 'string' || !ENCODINGS.includes(encoding)) {
    finishCall(
      call,
      new ServingError(Code.UNIMPLEMENTED, `Message encoding "${String(encoding)}" is not supported`),
    );
    return false;
  }
  call.encoding = encoding as MessageEncoding;
  return true;
}

/**
 * Sets the call's deadline from `grpc-timeout` and the timer that ends it DEADLINE_EXCEEDED;
 * false when the call is answered already (a malformed timeout, a deadline already past).
 */
export function armDeadline(call: CallState): boolean {
  try {
    const timeoutMs = parseGrpcTimeout(call.stream.headers['grpc-timeout']);
    if (timeoutMs !== undefined) call.deadline = Date.now() + timeoutMs;
  } catch (error) {
    finishCall(call, error);
    return false;
  }
  if (call.deadline === undefined) return true;
  const expire = (): void => {
    abortCall(call, new ServingError(Code.DEADLINE_EXCEEDED, 'Deadline exceeded'));
  };
  const left = call.deadline - Date.now();
  if (left <= 0) {
    expire();
    return false;
  }
  if (left < 2 ** 31) call.timers.push(setTimeout(expire, left));
  return true;
}

/** Ends the call CANCELLED unless its request message is whole within `timeoutMs`; the timer. */
export function armBodyTimer(call: CallState, timeoutMs: number): NodeJS.Timeout {
  const timer = setTimeout(() => {
    abortCall(call, new ServingError(Code.CANCELLED, `Request message not received within ${timeoutMs} ms`));
  }, timeoutMs);
  call.timers.push(timer);
  return timer;
}

/**
 * The call's stream has closed: its admission, output lease, timers and reservation are
 * released, the observer told, and a call left unanswered aborted (its work stops).
 */
export function closeCall(call: CallState, observed: ((end: RequestEnd) => void) | undefined): void {
  call.release?.();
  call.outputLease.release();
  if (observed !== undefined) {
    const code = call.answered ? call.code : Code.CANCELLED;
    observed({ status: Code[code], code, bytesIn: call.bytesIn, bytesOut: call.bytesOut });
  }
  for (const t of call.timers) clearTimeout(t);
  releaseReservation(call);
  if (call.answered) return;
  call.answered = true;
  // Clients reset the stream when their deadline passes, usually a little before our
  // timer (which started when the headers arrived) fires: that is a deadline, not a cancel.
  const expired = call.deadline !== undefined && Date.now() >= call.deadline - DEADLINE_SLACK_MS;
  call.controller.abort(
    expired
      ? new ServingError(Code.DEADLINE_EXCEEDED, 'Deadline exceeded')
      : new ServingError(Code.CANCELLED, 'Request cancelled by the client'),
  );
}
