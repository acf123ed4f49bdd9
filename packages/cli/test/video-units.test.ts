/**
 * Units of `visionserve video` without ffmpeg or a model: the PPM frame reader, the
 * WebSocket frame-stream client against a scripted server (the wire protocol of
 * /v2/models/{model}/stream: one binary message per frame, one JSON text per processed frame
 * in frame order), the pipeline's ordering and tracking with fake frames, and the overlay.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { createTracker } from '@visionserve/vision';
import { PpmReader } from '../src/video/ppm-reader.js';
import { frameStreamUrl, openFrameStream } from '../src/video/frame-infer.js';
import type { FrameSource } from '../src/video/frame-source.js';
import { type FrameAnswer, runVideo } from '../src/video/video-pipeline.js';
import { overlaySvg } from '../src/video/annotate.js';

function ppm(width: number, height: number, fill: number): Buffer {
  return Buffer.concat([
    Buffer.from(`P6\n${width} ${height}\n255\n`),
    Buffer.alloc(width * height * 3, fill),
  ]);
}

describe('PPM frame reader', () => {
  it('splits a stream cut anywhere into frames, sizes changing mid-stream', () => {
    const stream = Buffer.concat([ppm(4, 2, 1), ppm(3, 3, 2), ppm(4, 2, 3)]);
    for (const step of [1, 5, 7, 24, stream.length]) {
      const reader = new PpmReader();
      const frames = [];
      for (let at = 0; at < stream.length; at += step)
        frames.push(...reader.push(stream.subarray(at, at + step)));
      assert.deepEqual(
        frames.map((f) => [f.width, f.height, f.pixels.length, f.pixels[0]]),
        [
          [4, 2, 24, 1],
          [3, 3, 27, 2],
          [4, 2, 24, 3],
        ],
        `chunks of ${step}`,
      );
      assert.equal(reader.pending, 0);
    }
  });

  it('refuses bytes that are not PPM frames', () => {
    assert.throws(() => new PpmReader().push(Buffer.from('GIF89a.........')), /not a PPM frame/);
    assert.throws(() => new PpmReader().push(Buffer.from(`P6\n${'9'.repeat(80)}`)), /not a PPM frame/);
  });
});

/** A frame source of `n` tiny frames. */
function fakeSource(n: number): FrameSource {
  let i = 0;
  return {
    next: () =>
      Promise.resolve(
        i < n ? { index: i, timeS: i++ / 10, width: 2, height: 2, pixels: Buffer.alloc(12) } : undefined,
      ),
    dropped: 0,
    close: () => undefined,
  };
}

describe('video pipeline (fake frames)', () => {
  it('writes answers in frame order whatever order they come in, and tracks boxes', async () => {
    const lines: string[] = [];
    const box = (x: number) => ({ ymin: 0.1, xmin: x, ymax: 0.5, xmax: x + 0.2 });
    const summary = await runVideo({
      source: fakeSource(6),
      concurrency: 3,
      tracker: createTracker(),
      infer: async (_jpeg, frame): Promise<FrameAnswer> => {
        await new Promise((r) => setTimeout(r, (6 - frame) * 3)); // later frames answer first
        return {
          result: {
            predictions: [
              {
                num_detections: 1,
                detections: [{ class_id: 1, label: 'person', score: 0.9, box: box(frame * 0.02) }],
              },
            ],
          },
        };
      },
      onLine: (l) => void lines.push(l),
    });
    assert.equal(summary.processed, 6);
    const parsed = lines.map(
      (l) =>
        JSON.parse(l) as {
          frame: number;
          time_s: number;
          result: { predictions: [{ detections: { track_id: number }[] }] };
        },
    );
    assert.deepEqual(
      parsed.map((l) => l.frame),
      [0, 1, 2, 3, 4, 5],
    );
    assert.deepEqual(
      parsed.map((l) => l.time_s),
      [0, 0.1, 0.2, 0.3, 0.4, 0.5],
    );
    assert.deepEqual(
      new Set(parsed.map((l) => l.result.predictions[0].detections[0]!.track_id)),
      new Set([1]),
    );
  });

  it('stops on an error for the first frame, and counts later errors as failed frames', async () => {
    const failing =
      (from: number) =>
      (_jpeg: Buffer, frame: number): Promise<FrameAnswer> =>
        Promise.resolve(
          frame >= from
            ? { error: { code: 'NOT_FOUND', message: 'Servable not found' } }
            : { result: { predictions: [[]] } },
        );
    await assert.rejects(
      runVideo({ source: fakeSource(3), concurrency: 2, infer: failing(0), onLine: () => undefined }),
      /NOT_FOUND: Servable not found/,
    );
    const lines: string[] = [];
    const summary = await runVideo({
      source: fakeSource(4),
      concurrency: 2,
      infer: failing(2),
      onLine: (l) => void lines.push(l),
    });
    assert.deepEqual([summary.processed, summary.failed], [4, 2]);
    assert.deepEqual(JSON.parse(lines[3]!), {
      frame: 3,
      time_s: 0.3,
      error: { code: 'NOT_FOUND', message: 'Servable not found' },
    });
  });
});

describe('WebSocket frame-stream client', () => {
  it('builds the stream URL from the REST endpoint', () => {
    assert.equal(
      frameStreamUrl({ endpoint: 'http://h:8501/', model: 'det', policy: 'latest' }),
      'ws://h:8501/v2/models/det/stream?policy=latest',
    );
    assert.equal(
      frameStreamUrl({ endpoint: 'https://h', model: 'a b', version: 3, policy: 'all' }),
      'wss://h/v2/models/a%20b/versions/3/stream?policy=all',
    );
  });

  it('maps answers to frames: skipped frames are dropped, errors are per frame, a close fails the rest', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    const paths: string[] = [];
    wss.on('connection', (socket, req) => {
      paths.push(req.url ?? '');
      let frame = 0;
      socket.on('message', (data: Buffer) => {
        const k = frame++;
        const text = data.toString();
        // Frames 1 and 2 are dropped ("latest"): frame 3's answer comes next. Frame 4 is not an
        // image. Frame 5 closes the stream.
        if (k === 0 || k === 3)
          socket.send(
            JSON.stringify({
              frame: k,
              model_version: '1',
              result: { echo: text },
              dropped: k === 3 ? 2 : 0,
            }),
          );
        if (k === 4)
          socket.send(
            JSON.stringify({ frame: k, error: { code: 'INVALID_ARGUMENT', message: 'not an image' } }),
          );
        if (k === 5) socket.close(1011, 'bye');
      });
    });
    await new Promise((r) => wss.once('listening', r));
    try {
      const endpoint = `http://127.0.0.1:${(wss.address() as AddressInfo).port}`;
      const client = await openFrameStream({ endpoint, model: 'det', policy: 'latest' });
      const answers = await Promise.all(
        ['a', 'b', 'c', 'd', 'e', 'f'].map((s, i) => client.infer(Buffer.from(s), i)),
      );
      assert.deepEqual(answers.slice(0, 5), [
        { result: { echo: 'a' }, modelVersion: '1' },
        { dropped: true },
        { dropped: true },
        { result: { echo: 'd' }, modelVersion: '1' },
        { error: { code: 'INVALID_ARGUMENT', message: 'not an image' } },
      ]);
      assert.deepEqual(answers[5], {
        error: { code: 'UNAVAILABLE', message: 'the frame stream closed (1011 bye)' },
      });
      assert.deepEqual(paths, ['/v2/models/det/stream?policy=latest']);
      await client.close();
    } finally {
      await new Promise((r) => {
        wss.close(r);
      });
    }
  });

  it('says which server does not serve frame streams', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', verifyClient: () => false });
    await new Promise((r) => wss.once('listening', r));
    try {
      const endpoint = `http://127.0.0.1:${(wss.address() as AddressInfo).port}`;
      await assert.rejects(openFrameStream({ endpoint, model: 'det', policy: 'all' }), /answered HTTP 401/);
    } finally {
      await new Promise((r) => {
        wss.close(r);
      });
    }
  });
});

describe('annotation overlay', () => {
  it('draws a labelled box per detection and the top classes of a classifier, escaping labels', () => {
    const svg = overlaySvg(
      {
        predictions: [
          {
            detections: [
              {
                class_id: 1,
                label: 'a<b',
                score: 0.5,
                track_id: 7,
                box: { ymin: 0.5, xmin: 0.25, ymax: 1, xmax: 0.75 },
              },
            ],
          },
        ],
      },
      200,
      100,
    );
    assert.match(svg, /<rect x="50.0" y="50.0" width="100.0" height="50.0"/);
    assert.match(svg, />a&#60;b #7 0.50<\/text>/);
    const top = overlaySvg({ predictions: [[{ class_id: 281, label: 'tabby', score: 0.9 }]] }, 200, 100);
    assert.match(top, />tabby 0.90<\/text>/);
    assert.equal(overlaySvg({ predictions: [{ detections: [] }] }, 200, 100), '');
  });
});
