/**
 * Frame streams over WebSocket (`/v2/models/{m}/stream`) on a real server with MobileNetV2:
 * answers in frame order equal to what `/invocations` answers for the same image; `all`
 * answers every frame sent at 2× the model's rate, `latest` keeps latency bounded and reports
 * drops; a version rollover mid-stream loses no frame; hostile clients (non-images, oversized
 * frames, half messages, a client that never reads) get clear errors and hold bounded memory.
 * The same streams over gRPC (visionserve.stream.FrameStreamService) on both HTTP/2 transports.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cp } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { connect } from 'node:net';
import { join } from 'node:path';
import { image } from './helpers/shared.js';
import { tempRepo } from './helpers/model-repo.js';
import { placeMobilenet, request } from './helpers/sagemaker-models.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { type StreamAnswer, openStream, sleep } from './helpers/stream-client.js';
import { openGrpcFrameCall } from './helpers/grpc-frame-client.js';

/** A full garbage collection (V8's gc, exposed for this process). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/**
 * Array buffers still held after full collections. V8 frees array buffers on a background
 * sweeper, so one collection can still count buffers that are already garbage (this reading
 * varied 1-52 MB for the same run); a second collection after a pause finishes the first sweep.
 */
async function retainedArrayBuffers(): Promise<number> {
  for (let i = 0; i < 2; i++) {
    collectGarbage();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  collectGarbage();
  return process.memoryUsage().arrayBuffers;
}

const CAT = image('cat_tabby.jpg');
const DOG = image('dog_beagle.jpg');

/** The top-1 class id of an answer's result (the /invocations body for a classifier). */
function top1(answer: StreamAnswer): number {
  const result = answer.result as { predictions: { class_id: number }[][] };
  return result.predictions[0]![0]!.class_id;
}

/** Sends `frames` at a fixed interval; returns each frame's send time (performance.now()). */
async function sendPaced(
  ws: import('ws').WebSocket,
  frames: readonly Buffer[],
  intervalMs: number,
): Promise<number[]> {
  const sentAt: number[] = [];
  const start = performance.now();
  for (let i = 0; i < frames.length; i++) {
    const due = start + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    sentAt.push(performance.now());
    ws.send(frames[i]!);
  }
  return sentAt;
}

describe('frame streams over WebSocket (MobileNetV2)', () => {
  let root: string;
  let h: Harness;
  /** ms per /invocations request of the cat at the model's capacity: the model's rate is 1 / modelMs. */
  let modelMs: number;

  before(async () => {
    root = await tempRepo('vs-stream-');
    await placeMobilenet(root, 'mobilenet');
    h = await startHarness({
      modelName: 'mobilenet',
      modelBasePath: join(root, 'mobilenet'),
      fileSystemPollSeconds: 1,
      sagemakerPort: 0,
      instances: 1,
      streamMaxOpen: 6,
      streamMaxFrameBytes: 512 * 1024,
      requestBodyTimeoutMs: 2000,
    });
    const invoke = () =>
      request(`${h.sagemaker}/invocations`, {
        body: CAT,
        headers: { 'Content-Type': 'application/x-image' },
      });
    for (let i = 0; i < 3; i++) await invoke();
    // The model's capacity: two closed loops keep decode and the model both busy, as a stream does.
    const t0 = performance.now();
    const n = 6;
    await Promise.all(
      [0, 1].map(async () => {
        for (let i = 0; i < n; i++) await invoke();
      }),
    );
    modelMs = (performance.now() - t0) / (2 * n);
    console.log(`closed-loop /invocations capacity: ${modelMs.toFixed(1)} ms per request`);
  });
  after(async () => {
    await h.close();
  });

  it('answers every frame in order with what /invocations answers; a non-image is a per-frame error', async () => {
    const expected = new Map<Buffer, unknown>();
    for (const body of [CAT, DOG]) {
      const r = await request(`${h.sagemaker}/invocations`, {
        body,
        headers: { 'Content-Type': 'application/x-image' },
      });
      expected.set(body, r.json());
    }
    const s = await openStream(h.rest, 'mobilenet/stream?policy=all');
    const frames = Array.from({ length: 12 }, (_, i) =>
      i === 5 ? Buffer.from('not an image') : i % 2 ? DOG : CAT,
    );
    for (const f of frames) s.ws.send(f);
    await s.until(11);
    assert.deepEqual(
      s.answers.map((a) => a.frame),
      frames.map((_, i) => i),
    );
    for (const [i, a] of s.answers.entries()) {
      if (i === 5) {
        assert.equal(a.error?.code, 'INVALID_ARGUMENT');
        assert.match(a.error.message, /Unable to decode image/);
        continue;
      }
      assert.equal(a.model_version, '1');
      assert.deepEqual(a.result, expected.get(frames[i]!));
      assert.equal(a.dropped, 0);
      assert.ok(a.timings!.total_ms >= a.timings!.inference_ms);
    }
    assert.equal(top1(s.answers[0]!), 281);
    s.ws.close(1000);
    assert.equal((await s.closed).code, 1000);
  });

  it('policy=all at 2x the model rate answers every frame, in order', async () => {
    const s = await openStream(h.rest, 'mobilenet/stream?policy=all');
    const n = 30;
    await sendPaced(s.ws, Array<Buffer>(n).fill(CAT), modelMs / 2);
    await s.until(n - 1, 120_000);
    assert.deepEqual(
      s.answers.map((a) => a.frame),
      Array.from({ length: n }, (_, i) => i),
    );
    assert.ok(s.answers.every((a) => a.error === undefined && top1(a) === 281 && a.dropped === 0));
    s.ws.close();
  });

  it('policy=latest at 2x the model rate drops stale frames, says so, and keeps latency bounded', async () => {
    const s = await openStream(h.rest, 'mobilenet/stream?policy=latest');
    const n = 40;
    const sentAt = await sendPaced(s.ws, Array<Buffer>(n).fill(CAT), modelMs / 2);
    await s.until(n - 1, 120_000);
    const frames = s.answers.map((a) => a.frame);
    assert.ok(
      frames.every((f, i) => i === 0 || f > frames[i - 1]!),
      `frames in order: ${frames.join(',')}`,
    );
    assert.equal(frames.at(-1), n - 1, 'the newest frame is always processed');
    const last = s.answers.at(-1)!;
    assert.ok(last.dropped! > 0, 'frames were dropped');
    assert.equal(
      s.answers.length + last.dropped!,
      n,
      'every frame was either answered or counted as dropped',
    );
    // Client-side latency (sent -> answered) of each answered frame stays within a few model
    // runs; with `all` at the same rate it would grow by half a run per frame.
    const latencies = s.answers.map((a, i) => s.arrivals[i]! - sentAt[a.frame]!);
    const worst = Math.max(...latencies);
    console.log(
      `latest: ${s.answers.length}/${n} answered, ${last.dropped} dropped, worst latency ${worst.toFixed(0)} ms (model ${modelMs.toFixed(1)} ms)`,
    );
    assert.ok(worst < 8 * modelMs + 1500, `worst latency ${worst.toFixed(0)} ms`);
    s.ws.close();
  });

  it('two streams share the model fairly', async () => {
    const [a, b] = await Promise.all([
      openStream(h.rest, 'mobilenet/stream?policy=all'),
      openStream(h.rest, 'mobilenet/stream?policy=all'),
    ]);
    const n = 16;
    for (let i = 0; i < n; i++) {
      a.ws.send(CAT);
      b.ws.send(CAT);
    }
    await a.until(n / 2 - 1, 120_000);
    // When one stream is half done the other has made comparable progress.
    const other = b.answers.length;
    assert.ok(other >= n / 4, `the other stream answered ${other} of ${n} while the first answered ${n / 2}`);
    await Promise.all([a.until(n - 1, 120_000), b.until(n - 1, 120_000)]);
    a.ws.close();
    b.ws.close();
  });

  it('a version rollover mid-stream moves the stream to the new version and loses no frame', async () => {
    const s = await openStream(h.rest, 'mobilenet/stream?policy=all');
    let sent = 0;
    const base = join(root, 'mobilenet');
    let copied = false;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      s.ws.send(CAT);
      sent++;
      await sleep(Math.max(20, modelMs));
      if (!copied && sent === 5) {
        await cp(join(base, '1'), join(base, '2'), { recursive: true });
        copied = true;
      }
      const recent = s.answers.slice(-3);
      if (recent.length === 3 && recent.every((a) => a.model_version === '2')) break;
    }
    await s.until(sent - 1);
    assert.deepEqual(
      s.answers.map((a) => a.frame),
      Array.from({ length: sent }, (_, i) => i),
    );
    assert.deepEqual(
      s.answers.filter((a) => a.error !== undefined),
      [],
    );
    const versions = s.answers.map((a) => a.model_version);
    assert.equal(versions[0], '1');
    assert.equal(versions.at(-1), '2');
    assert.equal(versions.lastIndexOf('1') < versions.indexOf('2'), true, `versions ${versions.join(',')}`);
    assert.ok(s.answers.every((a) => top1(a) === 281));
    s.ws.close();
  });

  it('refuses unknown models, bad policies and streams beyond --stream_max_open with close codes', async () => {
    const missing = await openStream(h.rest, 'nope/stream');
    const gone = await missing.closed;
    assert.equal(gone.code, 1008);
    assert.match(gone.reason, /^NOT_FOUND: .*nope/);
    const bad = await openStream(h.rest, 'mobilenet/stream?policy=sometimes');
    const closed = await bad.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /policy must be latest or all/);
    const open = await Promise.all(Array.from({ length: 6 }, () => openStream(h.rest, 'mobilenet/stream')));
    const extra = await openStream(h.rest, 'mobilenet/stream');
    const refused = await extra.closed;
    assert.equal(refused.code, 1013);
    assert.match(refused.reason, /--stream_max_open=6/);
    for (const s of open) s.ws.close();
    await Promise.all(open.map((s) => s.closed));
    // The slots are free again.
    const again = await openStream(h.rest, 'mobilenet/stream');
    again.ws.send(CAT);
    await again.until(0);
    assert.equal(top1(again.answers[0]!), 281);
    again.ws.close();
  });

  it('closes a stream whose frame exceeds --stream_max_frame_bytes with 1009', async () => {
    const s = await openStream(h.rest, 'mobilenet/stream');
    s.ws.send(Buffer.alloc(600 * 1024, 0xff));
    assert.equal((await s.closed).code, 1009);
  });

  it('closes a stream stuck in half a message after --request_body_timeout_ms, others unaffected', async () => {
    const socket = connect(h.server.ports.rest!, '127.0.0.1');
    await new Promise<void>((resolve) =>
      socket.once('connect', () => {
        resolve();
      }),
    );
    socket.write(
      'GET /v2/models/mobilenet/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    const received: Buffer[] = [];
    socket.on('data', (d: Buffer) => received.push(d));
    const ended = new Promise<number>((resolve) => {
      const t0 = performance.now();
      socket.on('close', () => {
        resolve(performance.now() - t0);
      });
    });
    await sleep(100);
    // A masked binary frame announcing 100000 bytes, of which 10 are sent.
    const head = Buffer.from([0x82, 0xfe, 100000 >> 8, 100000 & 0xff, 1, 2, 3, 4]);
    socket.write(Buffer.concat([head, Buffer.alloc(10)]));
    const other = await openStream(h.rest, 'mobilenet/stream');
    other.ws.send(CAT);
    await other.until(0);
    assert.equal(top1(other.answers[0]!), 281);
    other.ws.close();
    const after = await ended;
    assert.ok(after < 15_000, `closed after ${after.toFixed(0)} ms`);
    assert.match(Buffer.concat(received).toString('latin1'), /101 Switching Protocols/);
  });

  it('a client that never reads its answers holds bounded memory and does not block others', async () => {
    const socket = connect(h.server.ports.rest!, '127.0.0.1');
    await new Promise<void>((resolve) =>
      socket.once('connect', () => {
        resolve();
      }),
    );
    socket.write(
      'GET /v2/models/mobilenet/stream?policy=latest HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n' +
        'Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    // Never read: pause at once, so the server's answers pile up in the kernel buffers.
    socket.pause();
    const mask = Buffer.from([9, 8, 7, 6]);
    const masked = Buffer.from(CAT.map((b, i) => b ^ mask[i % 4]!));
    const frame = Buffer.concat([
      Buffer.from([
        0x82,
        0xff,
        0,
        0,
        0,
        0,
        (CAT.length >>> 24) & 0xff,
        (CAT.length >>> 16) & 0xff,
        (CAT.length >>> 8) & 0xff,
        CAT.length & 0xff,
      ]),
      mask,
      masked,
    ]);
    // Retained memory, not garbage a collection has not reached yet: settled readings.
    const before = await retainedArrayBuffers();
    let sentBytes = 0;
    const until = Date.now() + Math.max(3000, 60 * modelMs);
    while (Date.now() < until && !socket.destroyed) {
      if (!socket.write(frame))
        await new Promise<void>((resolve) =>
          socket.once('drain', () => {
            resolve();
          }),
        );
      sentBytes += frame.length;
    }
    const other = await openStream(h.rest, 'mobilenet/stream');
    other.ws.send(CAT);
    await other.until(0);
    assert.equal(top1(other.answers[0]!), 281);
    other.ws.close();
    const grown = (await retainedArrayBuffers()) - before;
    console.log(
      `never-reading client sent ${(sentBytes / 1e6).toFixed(1)} MB; server array buffers grew ${(grown / 1e6).toFixed(1)} MB`,
    );
    assert.ok(sentBytes > 8 * 1024 * 1024, 'the server kept reading (latest drops stale frames)');
    assert.ok(grown < 32 * 1024 * 1024, `array buffers grew ${grown} bytes`);
    socket.destroy();
  });
});

for (const transport of ['lean', 'node'] as const) {
  describe(`frame streams over gRPC (visionserve.stream.FrameStreamService, ${transport} transport)`, () => {
    let root: string;
    let h: Harness;
    let port: number;

    before(async () => {
      root = await tempRepo('vs-grpc-stream-');
      await placeMobilenet(root, 'mobilenet');
      h = await startHarness({
        modelName: 'mobilenet',
        modelBasePath: join(root, 'mobilenet'),
        sagemakerPort: 0,
        instances: 1,
        grpcTransport: transport,
        streamMaxFrameBytes: 512 * 1024,
      });
      port = h.server.ports.grpc!;
    });
    after(async () => {
      await h.close();
    });

    it('answers every frame in order with the /invocations answer, then OK once the client half-closes', async () => {
      const expected = (
        await request(`${h.sagemaker}/invocations`, {
          body: CAT,
          headers: { 'Content-Type': 'application/x-image' },
        })
      ).json();
      const call = openGrpcFrameCall(port);
      call.send({ modelName: 'mobilenet', policy: 'all' });
      const n = 10;
      for (let i = 0; i < n; i++) call.send({ image: i === 3 ? Buffer.from('garbage') : CAT });
      call.end();
      const status = await call.status;
      assert.deepEqual(status, { code: 0, message: '' });
      assert.deepEqual(
        call.answers.map((a) => Number(a.frame)),
        Array.from({ length: n }, (_, i) => i),
      );
      for (const [i, a] of call.answers.entries()) {
        if (i === 3) {
          assert.equal(a.error?.code, 'INVALID_ARGUMENT');
          continue;
        }
        assert.equal(a.modelVersion, '1');
        assert.deepEqual(JSON.parse(a.resultJson), expected);
        assert.ok(a.timings!.totalMs >= a.timings!.inferenceMs);
      }
    });

    it('policy=all with frames sent as fast as the client can: flow control, every frame answered', async () => {
      const call = openGrpcFrameCall(port);
      call.send({ modelName: 'mobilenet', policy: 'all' });
      const n = 40;
      for (let i = 0; i < n; i++) call.send({ image: CAT });
      call.end();
      assert.equal((await call.status).code, 0);
      assert.equal(call.answers.length, n);
      assert.ok(call.answers.every((a) => a.error === undefined && Number(a.dropped) === 0));
    });

    it('policy=latest (the default) drops stale frames and counts them', async () => {
      const call = openGrpcFrameCall(port);
      call.send({ modelName: 'mobilenet' });
      const n = 40;
      for (let i = 0; i < n; i++) call.send({ image: CAT });
      call.end();
      assert.equal((await call.status).code, 0);
      const last = call.answers.at(-1)!;
      assert.equal(Number(last.frame), n - 1);
      assert.ok(Number(last.dropped) > 0);
      assert.equal(call.answers.length + Number(last.dropped), n);
    });

    it('ends with NOT_FOUND, INVALID_ARGUMENT or RESOURCE_EXHAUSTED for unknown models, bad policies and oversized frames', async () => {
      const missing = openGrpcFrameCall(port);
      missing.send({ modelName: 'nope', image: CAT });
      assert.equal((await missing.status).code, 5);
      const bad = openGrpcFrameCall(port);
      bad.send({ modelName: 'mobilenet', policy: 'sometimes' });
      const badStatus = await bad.status;
      assert.equal(badStatus.code, 3);
      assert.match(badStatus.message, /policy must be latest or all/);
      const big = openGrpcFrameCall(port);
      big.send({ modelName: 'mobilenet', image: Buffer.alloc(600 * 1024, 1) });
      assert.equal((await big.status).code, 8);
    });
  });
}

describe('frame streams under the connection guard (first-bytes deadline, cap)', () => {
  let root: string;
  let h: Harness;

  before(async () => {
    root = await tempRepo('vs-stream-guard-');
    await placeMobilenet(root, 'mobilenet');
    h = await startHarness({
      modelName: 'mobilenet',
      modelBasePath: join(root, 'mobilenet'),
      fileSystemPollSeconds: 0,
      connectionFirstBytesTimeoutMs: 300,
      maxConnections: 2,
    });
  });
  after(async () => {
    await h.close();
  });

  it('an open stream outlives the first-bytes deadline and is never evicted as idle at the cap', async () => {
    const a = await openStream(h.rest, 'mobilenet/stream');
    const b = await openStream(h.rest, 'mobilenet/stream');
    // Quiet past the first-bytes deadline: the upgrade was the connections' first bytes.
    await sleep(900);
    // A third connection at the cap (2) finds no idle connection to evict: it is refused.
    const third = connect(Number(new URL(h.rest).port), '127.0.0.1');
    const thirdClosed = new Promise<boolean>((resolve) =>
      third.once('close', () => {
        resolve(true);
      }),
    );
    third.on('error', () => undefined);
    third.write('GET /v1/models/mobilenet HTTP/1.1\r\nHost: x\r\n\r\n');
    const refused = await Promise.race([thirdClosed, sleep(3000).then(() => false)]);
    third.destroy();
    assert.ok(refused, 'the third connection is refused, not served in place of a stream');
    for (const s of [a, b]) {
      assert.equal(s.ws.readyState, s.ws.OPEN, 'the stream is still open');
      s.ws.send(CAT);
      await s.until(0);
      assert.equal(top1(s.answers[0]!), 281);
      s.ws.close(1000);
      await s.closed;
    }
  });
});
