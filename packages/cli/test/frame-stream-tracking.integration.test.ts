/**
 * Tracking on the server's frame streams: a detector whose visionserve.json has `tracking` gets
 * a `track_id` on every box of every frame, stable across the stream's frames, while
 * `/invocations` (one image, no stream) answers the same boxes without ids. Real server, real
 * YOLOX TF-OD detector, real WebSocket.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { image } from './helpers/shared.js';
import { tempRepo } from './helpers/model-repo.js';
import { placeDetector, request } from './helpers/sagemaker-models.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { openStream } from './helpers/stream-client.js';

const SOCCER = image('scene_soccer.jpg');

interface Box {
  readonly label?: string;
  readonly track_id?: number;
  readonly [key: string]: unknown;
}

function detectionsOf(result: unknown): Box[] {
  const predictions = (result as { predictions: { detections: Box[] }[] }).predictions;
  return predictions[0]!.detections;
}

describe('frame streams: tracking from visionserve.json', () => {
  let h: Harness;

  before(async () => {
    const root = await tempRepo('vs-stream-track-');
    const base = await placeDetector(root, 'detector');
    const configPath = join(base, 'visionserve.json');
    const config = JSON.parse(await readFile(configPath, 'utf8')) as Record<string, unknown>;
    await writeFile(configPath, JSON.stringify({ ...config, tracking: {} }));
    h = await startHarness({ modelName: 'detector', modelBasePath: base, sagemakerPort: 0 });
  });
  after(async () => {
    await h.close();
  });

  it('gives every box a track_id that stays the same over the frames of one stream', async () => {
    const single = await request(`${h.sagemaker}/invocations`, {
      body: SOCCER,
      headers: { 'Content-Type': 'application/x-image' },
    });
    const plain = detectionsOf(single.json());
    assert.ok(plain.length >= 2, `the scene has several objects (${plain.length})`);
    assert.ok(
      plain.every((d) => d.track_id === undefined),
      '/invocations answers one image: no track ids',
    );

    const s = await openStream(h.rest, 'detector/stream?policy=all');
    for (let i = 0; i < 4; i++) s.ws.send(SOCCER);
    await s.until(3);
    const frames = s.answers.map((a) => detectionsOf(a.result));
    for (const [i, boxes] of frames.entries()) {
      assert.equal(boxes.length, plain.length, `frame ${i}: the same boxes as /invocations`);
      assert.ok(
        boxes.every((d) => Number.isInteger(d.track_id) && d.track_id! > 0),
        `frame ${i}: every box has a track id`,
      );
      // Apart from the id, each box is what /invocations answers.
      assert.deepEqual(
        boxes.map(({ track_id: _, ...rest }) => rest),
        plain,
      );
    }
    const ids = frames.map((boxes) => boxes.map((d) => `${d.label}:${d.track_id}`).sort());
    assert.equal(new Set(frames[0]!.map((d) => d.track_id)).size, plain.length, 'one id per object');
    for (const later of ids.slice(1)) assert.deepEqual(later, ids[0], 'ids stable across frames');
    s.ws.close(1000);
    await s.closed;
  });
});
