/**
 * Two Node HTTP/2 peers must not stall each other (the sweep benchmark's hang: YOLOX with
 * batching, 64 concurrent 2 MB requests on one connection). Node's Http2Session stops reading
 * its socket while a write of its own is on the socket; with large receive windows both peers
 * could have more queued than the kernel buffers hold and wait on each other for ever. On the
 * real `visionserve serve` process: a closed loop of 64 concurrent 2 MB Predict calls with 1.2 MB responses on
 * one connection, from our client channel, the bench's gRPC shooter, and a bare node:http2
 * client advertising 64 MiB windows (as our client used to). And a connection whose client
 * stops reading must not keep the process from exiting after --shutdown_grace_ms.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import { Duplex } from 'node:stream';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { createGrpcChannel } from '@visionserve/client';
import { PredictRequestSchema, PredictResponseSchema, tensorToProto } from '@visionserve/protocol/tfs-proto';
import { createGrpcShooter, type ShotResult } from '../src/bench/overload-shooters.js';
import { rawDetectorModel } from '../src/tools/fixture-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

const PREDICT = '/tensorflow.serving.PredictionService/Predict';
const CONCURRENCY = 64;
/** uint8 [1, 836, 836, 3]: a 2.1 MB request. */
const SIZE = 836;
/** 3,000 anchors × (4 + 96) floats: a 1.2 MB response. */
const ANCHORS = 3000;
const CLASSES = 96;
/** A stalled connection answers nothing at all; a slow machine still answers something this often. */
const NO_PROGRESS_MS = 10_000;

function predictMessage(model: string, size: number): Uint8Array {
  const request = create(PredictRequestSchema, { modelSpec: { name: model } });
  const pixels = new Uint8Array(size * size * 3);
  for (let i = 0; i < pixels.length; i++) pixels[i] = (i * 7) & 0xff;
  request.inputs['input_tensor'] = tensorToProto(
    { dtype: 'uint8', shape: [1, size, size, 3], data: pixels },
    { asTensorContent: true },
  );
  return toBinary(PredictRequestSchema, request);
}

function framed(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.byteLength);
  frame.writeUInt32BE(message.byteLength, 1);
  frame.set(message, 5);
  return frame;
}

/** Resolves with `work`, or rejects when it has not settled within NO_PROGRESS_MS. */
async function withinStallLimit<T>(what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`${what}: not finished after ${NO_PROGRESS_MS} ms (the connection stalled)`));
    }, NO_PROGRESS_MS);
  });
  try {
    return await Promise.race([work, stalled]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A closed loop as the sweep benchmark runs it: CONCURRENCY callers, each sending its next call
 * as soon as its answer arrives, `perCaller` calls each; every answer goes to `check`. Rejects
 * when no call has been answered for NO_PROGRESS_MS (the connection stalled).
 */
async function closedLoop<T>(
  perCaller: number,
  call: () => Promise<T>,
  check: (answer: T) => void,
): Promise<number> {
  let answered = 0;
  let failure: Error | undefined;
  let watchdog: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    const arm = (): void => {
      const before = answered;
      watchdog = setTimeout(() => {
        if (answered === before)
          reject(
            new Error(`no answer for ${NO_PROGRESS_MS} ms after ${answered} answers: the connection stalled`),
          );
        else arm();
      }, NO_PROGRESS_MS);
    };
    arm();
  });
  const callers = Array.from({ length: CONCURRENCY }, async () => {
    for (let i = 0; i < perCaller && failure === undefined; i++) {
      const answer = await call();
      answered++;
      try {
        check(answer);
      } catch (error) {
        failure = error instanceof Error ? error : new Error(String(error));
      }
    }
  });
  try {
    await Promise.race([Promise.all(callers), stalled]);
  } finally {
    clearTimeout(watchdog);
  }
  if (failure !== undefined) throw failure;
  return answered;
}

/** One gRPC call on a bare session; resolves with grpc-status and the response body's size. */
function bareCall(
  session: http2.ClientHttp2Session,
  frame: Buffer,
): Promise<{ status: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': PREDICT,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status = '';
    let bytes = 0;
    stream.on('response', (h) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
    });
    stream.on('trailers', (h: http2.IncomingHttpHeaders) => {
      status = String(h['grpc-status']);
    });
    stream.on('data', (chunk: Buffer) => {
      bytes += chunk.byteLength;
    });
    stream.on('error', reject);
    stream.on('close', () => {
      resolve({ status, bytes });
    });
    stream.end(frame);
  });
}

describe('gRPC flow control: large concurrent calls on one connection do not stall', () => {
  let server: ServerProcess;
  let address: string;
  let message: Uint8Array;
  before(async () => {
    const root = await tempRepo();
    const base = await placeModel(
      root,
      'echo',
      1,
      rawDetectorModel({ size: SIZE, anchors: ANCHORS, classes: CLASSES }),
    );
    server = await startServerProcess([
      '--model_name=echo',
      `--model_base_path=${base}`,
      '--rest_api_port=-1',
      '--max_queue_wait_ms=0',
      '--enable_serialization_as_tensor_content',
    ]);
    address = `127.0.0.1:${server.ports.grpc!}`;
    message = predictMessage('echo', SIZE);
  });
  after(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
  });

  it('our client channel: a closed loop of 64 concurrent 2 MB calls with 1.2 MB answers', async () => {
    const channel = createGrpcChannel({ address });
    try {
      const answered = await closedLoop(
        2,
        () => channel.unary(PREDICT, message),
        (bytes) => {
          const scores = fromBinary(PredictResponseSchema, bytes).outputs['raw_detection_scores'];
          assert.equal(scores?.tensorContent.byteLength, ANCHORS * CLASSES * 4);
        },
      );
      assert.equal(answered, 2 * CONCURRENCY);
    } finally {
      channel.close();
    }
  });

  it("the bench's gRPC shooter: 64 concurrent calls, all answered OK", async () => {
    const shooter = createGrpcShooter({ address, path: PREDICT, message, timeoutMs: 60_000 });
    try {
      await closedLoop(
        1,
        () =>
          new Promise<ShotResult>((resolve) => {
            shooter.fire(resolve);
          }),
        (result) => {
          assert.equal(result.outcome, 'ok', result.label);
        },
      );
    } finally {
      shooter.close();
    }
  });

  it('a bare node:http2 client advertising 64 MiB windows cannot stall the server', async () => {
    const session = http2.connect(`http://${address}`, {
      maxSessionMemory: 1024,
      settings: { initialWindowSize: 16 * 1024 * 1024 },
    });
    session.on('error', () => undefined);
    session.on('connect', () => {
      session.setLocalWindowSize(64 * 1024 * 1024);
    });
    const frame = framed(message);
    try {
      await closedLoop(
        2,
        () => bareCall(session, frame),
        (answer) => {
          assert.equal(answer.status, '0');
          assert.ok(answer.bytes > ANCHORS * CLASSES * 4);
        },
      );
    } finally {
      session.destroy();
    }
  });
});

/**
 * A client connection whose bytes pass through a JS duplex, so that the test can stop reading
 * the TCP socket while HTTP/2 (which would otherwise own the socket) goes on unaware.
 */
function stoppableConnection(port: number): { duplex: Duplex; stopReading(): void; destroy(): void } {
  const socket = net.connect(port, '127.0.0.1');
  let reading = true;
  const duplex = new Duplex({
    read() {
      // Pushed from the socket's data events.
    },
    write(chunk: Buffer, _encoding, callback) {
      socket.write(chunk, callback);
    },
    final(callback) {
      socket.end(callback);
    },
  });
  socket.on('data', (chunk: Buffer) => {
    if (reading) duplex.push(chunk);
  });
  socket.on('error', () => undefined);
  duplex.on('error', () => undefined);
  return {
    duplex,
    stopReading() {
      reading = false;
      socket.pause();
    },
    destroy() {
      socket.destroy();
      duplex.destroy();
    },
  };
}

describe('shutdown with a connection whose client stopped reading', () => {
  it('the process exits within --shutdown_grace_ms (plus slack) instead of hanging', async () => {
    const root = await tempRepo();
    // A 120 KB request (inside the server's window) and an 11 MB response: more than the
    // kernel buffers of a stalled loopback connection hold, so the server's write never ends.
    const base = await placeModel(
      root,
      'big',
      1,
      rawDetectorModel({ size: 200, anchors: 30_000, classes: 90 }),
    );
    const graceMs = 1000;
    const server = await startServerProcess([
      '--model_name=big',
      `--model_base_path=${base}`,
      '--rest_api_port=-1',
      `--shutdown_grace_ms=${graceMs}`,
    ]);
    const connection = stoppableConnection(server.ports.grpc!);
    const session = http2.connect(`http://127.0.0.1:${server.ports.grpc!}`, {
      createConnection: () => connection.duplex,
      settings: { initialWindowSize: 64 * 1024 * 1024 },
    });
    session.on('error', () => undefined);
    session.on('connect', () => {
      session.setLocalWindowSize(256 * 1024 * 1024);
    });
    try {
      const frame = framed(predictMessage('big', 200));
      const answered = new Promise<void>((resolve) => {
        for (let i = 0; i < 2; i++) {
          const stream = session.request({
            ':method': 'POST',
            ':path': PREDICT,
            'content-type': 'application/grpc',
            te: 'trailers',
          });
          stream.on('error', () => undefined);
          stream.once('response', () => {
            // The server is writing its answers: stop reading them.
            connection.stopReading();
            resolve();
          });
          stream.end(frame);
        }
      });
      await withinStallLimit('first response headers', answered);
      // Let the server's writes fill the socket buffers.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const signalledAt = Date.now();
      server.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        server.exited,
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => {
            resolve(undefined);
          }, graceMs + 10_000);
        }),
      ]);
      clearTimeout(timer);
      if (exit === undefined) server.child.kill('SIGKILL');
      assert.ok(
        exit !== undefined,
        `still running ${graceMs + 10_000} ms after SIGTERM:\n${server.output()}`,
      );
      assert.equal(exit.code, 0, server.output());
      // The grace period, then cleanup; generous for a busy CI machine.
      assert.ok(exit.at - signalledAt < graceMs + 5000, `exited ${exit.at - signalledAt} ms after SIGTERM`);
    } finally {
      session.destroy();
      connection.destroy();
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
  });
});
