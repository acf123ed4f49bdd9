/**
 * A streaming gRPC call (client- or bidirectional streaming): request messages go to the
 * method's StreamHandler as they arrive (stream-messages.ts), its response messages go back
 * as it sends them, after one HEADERS, and its status in trailers.
 */
import { Code } from '@visionserve/protocol';
import { credentialsOf } from '../shared/management-guard.js';
import { type CallState, abortCall, finishCall, messagePrefix } from './grpc-call.js';
import type { MessageLimits } from './grpc-message-reader.js';
import type { GrpcMethod, GrpcStreamCall, GrpcStreamEvents, StreamHandler } from './grpc-service.js';
import { readStreamMessages } from './stream-messages.js';

export function serveStreamCall(
  call: CallState,
  method: GrpcMethod,
  handler: StreamHandler,
  limits: MessageLimits,
): void {
  let events: GrpcStreamEvents;
  try {
    events = handler(streamCallOf(call));
  } catch (error) {
    finishCall(call, error);
    return;
  }
  const onMessage = (message: Uint8Array): void => {
    call.bytesIn += message.byteLength;
    events.onMessage(message);
  };
  // The call holds no reservation of its own; each message being read holds one (stream-messages.ts).
  const { maxMessageBytes, budget } = limits;
  call.stream.read(
    readStreamMessages(
      {
        maxMessageBytes: Math.min(maxMessageBytes, method.maxMessageBytes ?? maxMessageBytes),
        encoding: call.encoding,
        budget,
      },
      onMessage,
      (error) => {
        abortCall(call, error);
      },
    ),
    () => {
      events.onEnd();
    },
  );
  // A stream of messages is admitted message by message, as they are read: its window is whole.
  call.stream.openWindow?.();
}

/** The call as its handler sees it. */
function streamCallOf(call: CallState): GrpcStreamCall {
  const { stream } = call;
  return {
    signal: call.controller.signal,
    deadline: call.deadline,
    metadata: stream.headers,
    credentials: () => credentialsOf(stream.headers, stream.socket),
    send(chunks) {
      sendMessage(call, chunks);
    },
    pause: () => {
      stream.pauseReading();
    },
    resume: () => {
      stream.resumeReading();
    },
    end(error) {
      if (error === undefined) endOk(call);
      else finishCall(call, error);
    },
  };
}

/** One response message: the response headers first, once. */
function sendMessage(call: CallState, chunks: readonly Uint8Array[]): void {
  const { stream } = call;
  if (call.answered || !stream.writable) return;
  if (call.headersSent !== true) {
    call.headersSent = true;
    stream.sendHeaders();
  }
  let length = 0;
  for (const c of chunks) length += c.byteLength;
  call.bytesOut += length;
  stream.sendMessage(messagePrefix(length), chunks, length);
}

/** Ends the call OK: trailers after the messages sent, or trailers-only when there were none. */
function endOk(call: CallState): void {
  if (call.answered) return;
  call.answered = true;
  const { stream } = call;
  stream.stopReading();
  if (!stream.writable) return;
  if (call.headersSent === true) stream.endWithStatus(Code.OK, '');
  else stream.respondStatus(Code.OK, '');
}
