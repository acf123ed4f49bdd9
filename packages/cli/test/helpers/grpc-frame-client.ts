import http2 from 'node:http2';
import { type MessageInitShape, create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  FRAME_STREAM_SERVICE,
  FrameRequestSchema,
  type FrameResponse,
  FrameResponseSchema,
  type FrameTensorSchema,
} from '@visionserve/protocol/stream-proto';

/** A gRPC frame stream under test, over node:http2 (an independent HTTP/2 client). */
export interface GrpcFrameCall {
  /** Sends one FrameRequest (the first names the model). */
  send(request: {
    modelName?: string;
    modelVersion?: bigint;
    policy?: string;
    image?: Uint8Array;
    tensor?: MessageInitShape<typeof FrameTensorSchema>;
  }): void;
  /** Half-closes: no more frames. */
  end(): void;
  readonly answers: FrameResponse[];
  /** The call's status once it ended: grpc-status and grpc-message. */
  readonly status: Promise<{ code: number; message: string }>;
  /** Resolves once `n` answers have arrived (or the call ended). */
  answered(n: number): Promise<void>;
  close(): void;
}

export function openGrpcFrameCall(port: number): GrpcFrameCall {
  // Tensor frames are large (MobileNetV2's: 602 KB): room for a burst of them queued unsent
  // (node's default of 10 MB resets the stream with ENHANCE_YOUR_CALM when the server reads slowly).
  const session = http2.connect(`http://127.0.0.1:${port}`, { maxSessionMemory: 128 });
  session.on('error', () => undefined);
  const req = session.request({
    ':method': 'POST',
    ':path': `/${FRAME_STREAM_SERVICE}/StreamFrames`,
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  const answers: FrameResponse[] = [];
  let pending = Buffer.alloc(0);
  const waiters: { n: number; resolve: () => void }[] = [];
  const wake = (all: boolean): void => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (all || answers.length >= waiters[i]!.n) waiters.splice(i, 1)[0]!.resolve();
    }
  };
  req.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
      const length = pending.readUInt32BE(1);
      answers.push(fromBinary(FrameResponseSchema, pending.subarray(5, 5 + length)));
      pending = pending.subarray(5 + length);
    }
    wake(false);
  });
  // The call ends with its status (trailers, or a trailers-only response), as gRPC clients take
  // it, whether or not this side has half-closed; the stream is then closed.
  // Why the stream ended without a status (a reset, a lost connection): code -1 with this message.
  let streamError = '';
  const status = new Promise<{ code: number; message: string }>((resolve) => {
    const done = (headers: http2.IncomingHttpHeaders): void => {
      wake(true);
      resolve({
        code: Number(headers['grpc-status'] ?? -1),
        message: decodeURIComponent(String(headers['grpc-message'] ?? streamError)),
      });
      req.close();
      session.close();
    };
    req.on('response', (h) => {
      if (h['grpc-status'] !== undefined) done(h);
    });
    req.on('trailers', (t: http2.IncomingHttpHeaders) => {
      done(t);
    });
    req.on('error', (error: Error) => {
      streamError = `${error.message} (rstCode ${req.rstCode ?? 'none'})`;
    });
    req.on('close', () => {
      done({});
    });
  });
  return {
    send(request) {
      const bytes = toBinary(FrameRequestSchema, create(FrameRequestSchema, request));
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(bytes.byteLength, 1);
      req.write(Buffer.concat([prefix, bytes]));
    },
    end: () => req.end(),
    answers,
    status,
    answered(n) {
      if (answers.length >= n || req.closed) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    close() {
      req.close();
      session.close();
    },
  };
}
