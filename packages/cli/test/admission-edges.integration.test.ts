/**
 * Admission at the edges, on the real server over real sockets (issue "Edges that hold",
 * items 2 and 7): bodies still arriving are not queued model work (250 trickling uploads
 * lock no one out, and the minimum upload rate ends them), and ordinary bursts are queued
 * at default settings, never refused.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { DEFAULTS } from '@visionserve/server';
import { IMAGE_PRESETS } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import { tempRepo } from './helpers/model-repo.js';
import { type Harness, grpcPredict, startHarness } from './helpers/server-harness.js';
import { placeDetector, placeMobilenet, request } from './helpers/sagemaker-models.js';
import { image } from './helpers/shared.js';

/** A raw upload and the status line of its answer (or why none came). */
interface Trickle {
  readonly socket: Socket;
  readonly answer: Promise<string>;
}

/**
 * An `/invocations` upload of a JPEG for `model` that declares its whole length and then
 * sends one byte every `everyMs`.
 */
function trickle(port: number, model: string, everyMs: number): Trickle {
  const socket = connect(port, '127.0.0.1');
  const body = image('cat_tabby.jpg');
  let sent = 0;
  let timer: NodeJS.Timeout | undefined;
  socket.once('connect', () => {
    socket.write(
      `POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n` +
        `X-Amzn-SageMaker-Custom-Attributes: tfs-model-name=${model}\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    timer = setInterval(() => {
      if (sent < body.length && socket.writable) socket.write(body.subarray(sent, ++sent));
    }, everyMs);
  });
  const answer = new Promise<string>((resolve) => {
    let text = '';
    const done = (): void => {
      clearInterval(timer);
      resolve(text.split('\r\n', 1)[0] || 'closed without an answer');
    };
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (text.includes('\r\n')) done();
    });

    socket.once('close', done);
    socket.once('error', () => undefined);
  });
  return { socket, answer };
}

describe('admission counts work that exists (250 trickling uploads)', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo('vs-adm-');
    await placeMobilenet(root);
    const config = join(root, 'models.config');
    await writeFile(config, `model_config_list { config { name: 'mobilenet' base_path: 'mobilenet' } }`);
    h = await startHarness({
      modelConfigFile: config,
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      // The strictest setting in use (the former default): bodies in flight would pass it at once.
      maxQueueWaitMs: 100,
      maxConnections: 1024,
    });
  });
  after(async () => {
    await h.close();
  });

  it('serves gRPC Predict and /invocations on the model meanwhile, then ends the tricklers (408)', async () => {
    const port = h.server.ports.sagemaker!;
    const tricklers = Array.from({ length: 250 }, () => trickle(port, 'mobilenet', 2000));
    try {
      // Every upload has sent its headers (and so passed admission) before the others come.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const input = (await imageToTensor(image('cat_tabby.jpg'), IMAGE_PRESETS.imagenet)).tensor;
      for (let i = 0; i < 4; i++) {
        const { outputs } = await grpcPredict(h.grpc, 'mobilenet', { input });
        assert.ok(Object.keys(outputs).length > 0);
      }
      const jpeg = await request(`${h.sagemaker}/invocations`, {
        body: image('cat_tabby.jpg'),
        headers: { 'Content-Type': 'image/jpeg' },
      });
      assert.equal(jpeg.status, 200, jpeg.text);
      // Slower than --min_request_body_bytes_per_s: 408 and closed, within two 5 s windows.
      const started = performance.now();
      const answers = await Promise.all(tricklers.map((t) => t.answer));
      const counts = new Map<string, number>();
      for (const a of answers) counts.set(a, (counts.get(a) ?? 0) + 1);
      // Opened all at once, the tricklers that came while the first ones' first bytes were still
      // awaited (100 ms) were refused at their headers: new arrivals, not the model's other clients.
      const timedOut = counts.get('HTTP/1.1 408 Request Timeout') ?? 0;
      const refused = counts.get('HTTP/1.1 503 Service Unavailable') ?? 0;
      assert.equal(timedOut + refused, 250, JSON.stringify([...counts]));
      assert.ok(timedOut > 0, JSON.stringify([...counts]));
      assert.ok(performance.now() - started < 15_000, 'ended by the upload rate, not the body timeout');
    } finally {
      for (const t of tricklers) t.socket.destroy();
    }
  });
});

describe('bursts are queued at default settings, never refused', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo('vs-burst-');
    await placeMobilenet(root);
    await placeDetector(root);
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'detector' base_path: 'detector' }
      }`,
    );
    // The harness turns shedding off for functional tests: these run at the serve defaults.
    h = await startHarness({
      modelConfigFile: config,
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      maxQueueWaitMs: DEFAULTS.maxQueueWaitMs,
    });
  });
  after(async () => {
    await h.close();
  });

  it('8 concurrent /invocations to the YOLOX detector: 8 answers, 0 refusals', async () => {
    const body = image('scene_soccer.jpg');
    const send = () =>
      request(`${h.sagemaker}/invocations`, {
        body,
        headers: {
          'Content-Type': 'image/jpeg',
          'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=detector',
        },
      });
    for (let round = 0; round < 2; round++) {
      const results = await Promise.all(Array.from({ length: 8 }, send));
      assert.deepEqual(
        results.map((r) => r.status),
        Array(8).fill(200),
        results.map((r) => r.text.slice(0, 200)).join('\n'),
      );
    }
  });

  it('16 concurrent MobileNetV2 gRPC Predicts: 16 answers, 0 refusals', async () => {
    const input = (await imageToTensor(image('cat_tabby.jpg'), IMAGE_PRESETS.imagenet)).tensor;
    for (let round = 0; round < 2; round++) {
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, () => grpcPredict(h.grpc, 'mobilenet', { input })),
      );
      const refused = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason));
      assert.deepEqual(refused, []);
    }
  });
});
