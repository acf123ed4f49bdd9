/**
 * Frame streams over gRPC: `visionserve.stream.FrameStreamService/StreamFrames`, a
 * bidirectional call on the gRPC port with the WebSocket route's protocol
 * (proto/visionserve/frame_stream.proto), plus raw tensor frames. The first message names the
 * model and policy; fatal errors end the call with their gRPC status; per-frame errors are answers.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ServingError, invalidArgument } from '@visionserve/protocol';
import {
  FRAME_STREAM_SERVICE,
  FrameRequestSchema,
  type FrameRequest,
  FrameResponseSchema,
  tensorOfFrameTensor,
} from '@visionserve/protocol/stream-proto';
import type { GrpcService, GrpcStreamCall, GrpcStreamEvents } from '../grpc/grpc-service.js';
import {
  FRAME_POLICIES,
  type FrameAnswer,
  type FramePolicy,
  type FrameStream,
  type FrameStreams,
} from './frame-stream.js';

/** Room for the message's own fields around the frame, in bytes. */
const MESSAGE_OVERHEAD_BYTES = 4096;

export function createGrpcFrameStreamService(streams: FrameStreams): GrpcService {
  return {
    name: FRAME_STREAM_SERVICE,
    api: 'stream',
    methods: {
      StreamFrames: {
        handler: () =>
          Promise.reject(new ServingError(Code.UNIMPLEMENTED, 'StreamFrames is a streaming method')),
        stream: (call) => serveFrameCall(streams, call),
        maxMessageBytes: streams.limits.maxFrameBytes + MESSAGE_OVERHEAD_BYTES,
      },
    },
  };
}

function decodeRequest(bytes: Uint8Array): FrameRequest {
  try {
    return fromBinary(FrameRequestSchema, bytes);
  } catch (error) {
    throw invalidArgument(`Malformed visionserve.stream.FrameRequest: ${(error as Error).message}`);
  }
}

function openFrom(streams: FrameStreams, call: GrpcStreamCall, first: FrameRequest): FrameStream {
  const policy = first.policy === '' ? 'latest' : first.policy;
  if (!(FRAME_POLICIES as readonly string[]).includes(policy)) {
    throw invalidArgument(`policy must be latest or all, got "${policy.slice(0, 32)}"`);
  }
  if (first.modelName === '')
    throw invalidArgument('The first FrameRequest must name the model (model_name)');
  const version = first.modelVersion === 0n ? undefined : Number(first.modelVersion);
  return streams.open(
    {
      model: { name: first.modelName, version },
      policy: policy as FramePolicy,
      headers: call.metadata,
      transport: 'grpc',
    },
    {
      send: (answer, written) => {
        call.send([toBinary(FrameResponseSchema, responseOf(answer))]);
        // The gRPC server queues what the client's windows hold back (and resets a stream that stalls).
        written();
      },
      pause: () => {
        call.pause();
      },
      resume: () => {
        call.resume();
      },
      fail: (error) => {
        call.end(error);
      },
    },
  );
}

function serveFrameCall(streams: FrameStreams, call: GrpcStreamCall): GrpcStreamEvents {
  let stream: FrameStream | undefined;
  let failed = false;
  call.signal.addEventListener('abort', () => stream?.close(), { once: true });
  return {
    onMessage(bytes) {
      if (failed) return;
      try {
        const request = decodeRequest(bytes);
        stream ??= openFrom(streams, call, request);
        pushFrame(stream, request);
      } catch (error) {
        failed = true;
        stream?.close();
        call.end(error);
      }
    },
    onEnd() {
      if (failed) return;
      if (stream === undefined) call.end();
      else
        stream.finish(() => {
          call.end();
        });
    },
  };
}

/** The message's frame, if any: an encoded image, or a raw tensor (decoded when it runs). */
function pushFrame(stream: FrameStream, request: FrameRequest): void {
  const { image, tensor } = request;
  if (tensor === undefined) {
    if (image.byteLength > 0) stream.push(image);
    return;
  }
  stream.pushTensor({
    byteLength: tensor.rawContents.byteLength + image.byteLength,
    decode: () => {
      if (image.byteLength > 0)
        throw invalidArgument('A FrameRequest carries one frame: image or tensor, not both');
      return tensorOfFrameTensor(tensor, 'Frame tensor');
    },
  });
}

function responseOf(answer: FrameAnswer): ReturnType<typeof create<typeof FrameResponseSchema>> {
  if ('error' in answer) {
    return create(FrameResponseSchema, {
      frame: BigInt(answer.frame),
      error: { code: Code[answer.error.code], message: answer.error.message },
    });
  }
  return create(FrameResponseSchema, {
    frame: BigInt(answer.frame),
    modelVersion: String(answer.modelVersion),
    resultJson: answer.resultJson,
    timings: {
      queueMs: answer.timings.queueMs,
      inferenceMs: answer.timings.inferenceMs,
      totalMs: answer.timings.totalMs,
    },
    dropped: BigInt(answer.dropped),
  });
}
