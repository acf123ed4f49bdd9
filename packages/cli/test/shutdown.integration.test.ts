/**
 * SIGTERM under load, on the real `visionserve serve` process: 8 clients loop over gRPC
 * (raw node:http2, one HTTP/2 connection each) and keep-alive HTTP while the signal comes.
 * Every request the server accepted must be answered; what it refused must be refused in a
 * way a client can tell was never processed (connection refused, HTTP/2 GOAWAY /
 * REFUSED_STREAM); the process exits 0, within 1 s of the last answer.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import { create, toBinary } from '@bufbuild/protobuf';
import { tensorToProto, PredictRequestSchema } from '@visionserve/protocol/tfs-proto';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { sharedModel } from './helpers/shared.js';
import { startServerProcess } from './helpers/server-process.js';

const REPETITIONS = Number(process.env['VISIONSERVE_SIGTERM_REPETITIONS'] ?? 20);
const GRPC_CLIENTS = 4;
const HTTP_CLIENTS = 4;

/** How one request ended, from the client's side. */
type Outcome =
  | { kind: 'ok'; at: number }
  | { kind: 'answered-error'; at: number; detail: string }
  | { kind: 'refused'; detail: string }
  | { kind: 'reset'; detail: string };

interface Tally {
  ok: number;
  answeredErrors: string[];
  refused: number;
  resets: string[];
  lastAnswerAt: number;
}

function newTally(): Tally {
  return { ok: 0, answeredErrors: [], refused: 0, resets: [], lastAnswerAt: 0 };
}

function record(tally: Tally, outcome: Outcome): void {
  switch (outcome.kind) {
    case 'ok':
      tally.ok++;
      tally.lastAnswerAt = Math.max(tally.lastAnswerAt, outcome.at);
      break;
    case 'answered-error':
      tally.answeredErrors.push(outcome.detail);
      tally.lastAnswerAt = Math.max(tally.lastAnswerAt, outcome.at);
      break;
    case 'refused':
      tally.refused++;
      break;
    case 'reset':
      tally.resets.push(outcome.detail);
      break;
  }
}

/** One length-prefixed PredictRequest for MobileNetV2 (tensor_content), built once. */
function grpcFrame(): Buffer {
  const request = create(PredictRequestSchema, { modelSpec: { name: 'mobilenet' } });
  request.inputs['input'] = tensorToProto(
    { dtype: 'float32', shape: [1, 3, 224, 224], data: new Float32Array(3 * 224 * 224).fill(0.25) },
    { asTensorContent: true },
  );
  const message = toBinary(PredictRequestSchema, request);
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

const REFUSED_STREAM = http2.constants.NGHTTP2_REFUSED_STREAM;

/** A gRPC Predict over an existing session; classifies how it ended. */
function grpcCall(session: http2.ClientHttp2Session, frame: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request({
        ':method': 'POST',
        ':path': '/tensorflow.serving.PredictionService/Predict',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
    } catch (error) {
      // The session got GOAWAY (or closed) before this request was sent.
      resolve({ kind: 'refused', detail: (error as NodeJS.ErrnoException).code ?? String(error) });
      return;
    }
    let status: string | undefined;
    let message = '';
    stream.on('response', (headers) => {
      // Trailers-only responses carry grpc-status in the headers.
      if (headers['grpc-status'] !== undefined) {
        status = String(headers['grpc-status']);
        message = String(headers['grpc-message'] ?? '');
      }
    });
    stream.on('trailers', (trailers: http2.IncomingHttpHeaders) => {
      status = String(trailers['grpc-status']);
      message = String(trailers['grpc-message'] ?? '');
    });
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    stream.on('close', () => {
      const at = Date.now();
      if (status === '0') resolve({ kind: 'ok', at });
      else if (status !== undefined)
        resolve({ kind: 'answered-error', at, detail: `grpc ${status} ${message}` });
      else if (stream.rstCode === REFUSED_STREAM) resolve({ kind: 'refused', detail: 'REFUSED_STREAM' });
      else resolve({ kind: 'reset', detail: `grpc stream closed without status (rst ${stream.rstCode})` });
    });
    stream.end(frame);
  });
}

/** Loops gRPC calls on one connection until the server refuses or the connection is gone. */
async function grpcClient(url: string, frame: Buffer, tally: Tally): Promise<void> {
  const session = http2.connect(url);
  session.on('error', () => undefined);
  try {
    for (;;) {
      if (session.destroyed || session.closed) {
        tally.refused++;
        return;
      }
      const outcome = await grpcCall(session, frame);
      record(tally, outcome);
      if (outcome.kind === 'refused' || outcome.kind === 'reset') return;
    }
  } finally {
    session.destroy();
  }
}

/** A REST predict on a keep-alive agent with one socket; classifies how it ended. */
function httpCall(agent: http.Agent, port: number, body: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/models/mobilenet:predict',
        agent,
        headers: { 'Content-Type': 'application/json', 'Content-Length': body.length },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const at = Date.now();
          if (res.statusCode === 200) resolve({ kind: 'ok', at });
          else resolve({ kind: 'answered-error', at, detail: `http ${res.statusCode}` });
        });
        res.on('error', (error) => {
          resolve({ kind: 'reset', detail: `response aborted: ${error.message}` });
        });
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') resolve({ kind: 'refused', detail: 'ECONNREFUSED' });
      // A keep-alive socket closed under a request that was being sent: the server closed a
      // connection it considered idle. Clients may retry these, but a draining server should
      // not cause them for clients that keep sending.
      else
        resolve({
          kind: 'reset',
          detail: `${error.code ?? error.message} (reused socket: ${req.reusedSocket})`,
        });
    });
    req.end(body);
  });
}

async function httpClient(port: number, body: Buffer, tally: Tally): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (;;) {
      const outcome = await httpCall(agent, port, body);
      record(tally, outcome);
      if (outcome.kind === 'refused' || outcome.kind === 'reset') return;
    }
  } finally {
    agent.destroy();
  }
}

describe('SIGTERM under load (real process, gRPC and keep-alive HTTP clients)', () => {
  let root: string;
  let frame: Buffer;
  let restBody: Buffer;
  before(async () => {
    root = await tempRepo('vs-sigterm-');
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    frame = grpcFrame();
    const pixels = Array.from({ length: 3 }, () =>
      Array.from({ length: 224 }, () => new Array<number>(224).fill(0.25)),
    );
    restBody = Buffer.from(JSON.stringify({ instances: [pixels] }));
  });
  after(() => undefined);

  it(`exits 0 after answering everything it accepted, ${REPETITIONS} times`, async () => {
    const summary: string[] = [];
    for (let rep = 0; rep < REPETITIONS; rep++) {
      const server = await startServerProcess([
        '--model_name=mobilenet',
        `--model_base_path=${root}/mobilenet`,
        '--file_system_poll_wait_seconds=0',
        '--max_queue_wait_ms=0',
        '--model_instances=2',
        '--enable_model_warmup=false',
      ]);
      const tally = newTally();
      const clients = [
        ...Array.from({ length: GRPC_CLIENTS }, () =>
          grpcClient(`http://127.0.0.1:${server.ports.grpc!}`, frame, tally),
        ),
        ...Array.from({ length: HTTP_CLIENTS }, () => httpClient(server.ports.rest!, restBody, tally)),
      ];
      // Let the clients get going (and vary the moment the signal lands).
      const startedAt = Date.now();
      while (tally.ok < 8 && Date.now() - startedAt < 20_000) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 50 + ((rep * 37) % 200)));
      const okBefore = tally.ok;
      const signalledAt = Date.now();
      server.child.kill('SIGTERM');
      await Promise.all(clients);
      const exit = await server.exited;
      const lastAnswer = Math.max(tally.lastAnswerAt, signalledAt);
      const line =
        `rep ${rep}: ok ${tally.ok} (${tally.ok - okBefore} after SIGTERM), refused ${tally.refused}, ` +
        `answered errors ${tally.answeredErrors.length}, resets ${tally.resets.length}, ` +
        `exit ${exit.code ?? exit.signal} ${exit.at - lastAnswer} ms after the last answer`;
      summary.push(line);
      const context = `${line}\n${tally.resets.join('\n')}\n${tally.answeredErrors.join('\n')}\n--- server output ---\n${server.output()}`;
      assert.equal(exit.code, 0, context);
      assert.deepEqual(tally.resets, [], context);
      assert.deepEqual(tally.answeredErrors, [], context);
      assert.ok(exit.at - lastAnswer <= 1000, context);
    }
    console.log(summary.join('\n'));
  });
});
