/**
 * `ModelStreamInfer`, the bidirectional stream tritonclient's `start_stream` /
 * `async_stream_infer` use: every ModelInferRequest on the stream is served as ModelInfer
 * serves it (admission, the call's deadline, one scoped core call) and answered with one
 * ModelStreamInferResponse, in request order: its `infer_response` (with the request's id),
 * or, as Triton reports a failed request on a stream, its `error_message` (the stream goes on).
 */
import { type ServingError, toServingError } from '@visionserve/protocol';
import {
  decodeModelInferRequest,
  writeModelInferResponse,
  writeModelStreamInferError,
  writeModelStreamInferResponse,
} from '@visionserve/protocol/kserve-proto';
import type { GrpcStreamCall, GrpcStreamEvents } from '../../grpc/grpc-service.js';
import type { KServeService } from '../kserve-service.js';

/** Requests of one stream run at once (answers still go out in request order). */
export const STREAM_INFER_INFLIGHT = 2;
/** Requests read and waiting per stream before the stream stops reading (HTTP/2 flow control). */
export const STREAM_INFER_WAITING = 8;

export function serveModelStreamInfer(
  kserve: KServeService,
  call: GrpcStreamCall,
  onInternal: (error: unknown) => void,
): GrpcStreamEvents {
  const waiting: Uint8Array[] = [];
  /** Started requests in order; answered from the front. */
  const started: { answer: Uint8Array[] | undefined }[] = [];
  let running = 0;
  let ended = false;
  let paused = false;

  const flush = (): void => {
    while (started[0]?.answer !== undefined) call.send(started.shift()!.answer!);
  };
  const pump = (): void => {
    while (waiting.length > 0 && running < STREAM_INFER_INFLIGHT && !call.signal.aborted) {
      const slot: { answer: Uint8Array[] | undefined } = { answer: undefined };
      started.push(slot);
      running++;
      void inferOne(kserve, call, waiting.shift()!, onInternal).then((answer) => {
        running--;
        slot.answer = answer;
        flush();
        pump();
      });
    }
    const full = waiting.length >= STREAM_INFER_WAITING;
    if (full !== paused) {
      paused = full;
      if (full) call.pause();
      else call.resume();
    }
    if (ended && waiting.length === 0 && started.length === 0) call.end();
  };
  return {
    onMessage(message) {
      waiting.push(message);
      pump();
    },
    onEnd() {
      ended = true;
      pump();
    },
  };
}

/** One request of the stream, answered as a ModelStreamInferResponse (never rejects). */
async function inferOne(
  kserve: KServeService,
  call: GrpcStreamCall,
  bytes: Uint8Array,
  onInternal: (error: unknown) => void,
): Promise<Uint8Array[]> {
  const arrivedAt = process.hrtime.bigint();
  let id = '';
  try {
    const request = decodeModelInferRequest(bytes);
    id = request.id;
    const ref = { name: request.modelName, version: request.modelVersion };
    const { signal, deadline } = call;
    const release = kserve.admit(ref, { signal, deadline });
    try {
      const response = await kserve.infer(ref, request, {
        signal,
        deadline,
        arrivedAt,
        // The message is this request's own buffer (stream-messages.ts): its raw inputs may move to the worker.
        ownedBuffers: ownsWholeBuffer(bytes) ? [bytes.buffer as ArrayBuffer] : undefined,
        encode: writeModelInferResponse,
      });
      return writeModelStreamInferResponse(response);
    } finally {
      release();
    }
  } catch (error) {
    const serving: ServingError = toServingError(error);
    if (serving.message === 'Internal error') onInternal(error);
    return [writeModelStreamInferError(serving.message, id)];
  }
}

/** Whether `bytes` is a whole ArrayBuffer of its own (never a view into a pool or a larger read). */
function ownsWholeBuffer(bytes: Uint8Array): boolean {
  return (
    bytes.byteOffset === 0 &&
    bytes.byteLength === bytes.buffer.byteLength &&
    !(bytes.buffer instanceof SharedArrayBuffer)
  );
}
