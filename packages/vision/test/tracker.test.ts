import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError } from '@visionserve/protocol';
import { type Detection, boxIou, createTracker, parseVisionConfig } from '../src/index.js';

/** A detection of class `classId` with its box's top-left corner at (x, y), size w×h. */
function det(x: number, y: number, score = 0.9, classId = 0, w = 0.1, h = 0.2): Detection {
  return { class_id: classId, score, box: { xmin: x, ymin: y, xmax: x + w, ymax: y + h } };
}

const ids = (tracked: { track_id?: number }[]): (number | undefined)[] => tracked.map((d) => d.track_id);

describe('object tracker', () => {
  it('computes IoU', () => {
    assert.equal(boxIou(det(0, 0).box, det(0, 0).box), 1);
    assert.equal(boxIou(det(0, 0).box, det(0.5, 0.5).box), 0);
    // Half overlap in x: intersection 0.05×0.2, union 0.15×0.2.
    assert.ok(Math.abs(boxIou(det(0, 0).box, det(0.05, 0).box) - 1 / 3) < 1e-9);
  });

  it('keeps ids of objects moving along known paths, in any detection order', () => {
    const tracker = createTracker();
    const seen = new Map<string, Set<number>>();
    for (let f = 0; f < 40; f++) {
      // A moves right, B moves down, C stands still; the detector lists them in varying order.
      const objects: [string, Detection][] = [
        ['A', det(0.05 + f * 0.02, 0.1)],
        ['B', det(0.6, 0.02 + f * 0.015)],
        ['C', det(0.3, 0.7, 0.8)],
      ];
      if (f % 2 === 1) objects.reverse();
      const out = tracker.update(objects.map(([, d]) => d));
      objects.forEach(([name], i) => {
        const id = out[i]!.track_id;
        assert.ok(id !== undefined, `frame ${f} ${name}`);
        seen.set(name, (seen.get(name) ?? new Set()).add(id));
      });
    }
    assert.deepEqual(
      [...seen.values()].map((s) => s.size),
      [1, 1, 1],
    );
    assert.equal(new Set([...seen.values()].map((s) => [...s][0])).size, 3);
  });

  it('follows an object that speeds up until its boxes barely overlap (velocity prediction)', () => {
    const tracker = createTracker();
    // 0.05 a frame (IoU 1/3 with the last box), then 0.08 a frame (IoU 0.11 < 0.3): only the
    // box moved by the learnt velocity still overlaps enough.
    const xs: number[] = [0.02];
    for (let f = 1; f < 12; f++) xs.push(xs[f - 1]! + (f < 5 ? 0.05 : 0.08));
    assert.ok(boxIou(det(xs[10]!, 0.4).box, det(xs[11]!, 0.4).box) < 0.3);
    const got = new Set(xs.map((x) => tracker.update([det(x, 0.4)])[0]!.track_id));
    assert.deepEqual([...got], [1]);
  });

  it('keeps an id through a low-score frame (second stage) and never starts a track from one', () => {
    const tracker = createTracker();
    const a = tracker.update([det(0.1, 0.1, 0.9)])[0]!.track_id;
    const dip = tracker.update([det(0.11, 0.1, 0.3), det(0.7, 0.7, 0.3)]);
    assert.deepEqual(ids(dip), [a, undefined]);
    assert.equal(tracker.update([det(0.12, 0.1, 0.9)])[0]!.track_id, a);
    // Plain IoU tracking ignores the score split: both low boxes are tracked.
    const iou = createTracker({ kind: 'iou' });
    const first = ids(iou.update([det(0.1, 0.1, 0.3), det(0.7, 0.7, 0.3)]));
    assert.deepEqual(first, [1, 2]);
    assert.deepEqual(ids(iou.update([det(0.7, 0.7, 0.05)])), [undefined]);
  });

  it('brings an id back after a gap up to maxAge and not after', () => {
    const tracker = createTracker({ maxAge: 3 });
    const a = tracker.update([det(0.4, 0.4)])[0]!.track_id;
    for (let f = 0; f < 3; f++) tracker.update([]);
    assert.equal(tracker.update([det(0.4, 0.4)])[0]!.track_id, a);
    for (let f = 0; f < 4; f++) tracker.update([]);
    assert.equal(tracker.liveTracks, 0);
    const b = tracker.update([det(0.4, 0.4)])[0]!.track_id;
    assert.notEqual(b, a);
  });

  it('does not match boxes of another class unless classAware is false', () => {
    const aware = createTracker();
    const a = aware.update([det(0.4, 0.4, 0.9, 1)])[0]!.track_id;
    assert.notEqual(aware.update([det(0.4, 0.4, 0.9, 2)])[0]!.track_id, a);
    const blind = createTracker({ classAware: false });
    const b = blind.update([det(0.4, 0.4, 0.9, 1)])[0]!.track_id;
    assert.equal(blind.update([det(0.4, 0.4, 0.9, 2)])[0]!.track_id, b);
  });

  it('gives two crossing objects of one class their own ids while they are apart', () => {
    const tracker = createTracker();
    let first: (number | undefined)[] = [];
    let last: (number | undefined)[] = [];
    for (let f = 0; f < 8; f++) {
      const out = tracker.update([det(0.1 + f * 0.03, 0.1), det(0.7 - f * 0.03, 0.6)]);
      if (f === 0) first = ids(out);
      last = ids(out);
    }
    assert.deepEqual(last, first);
  });

  it('is configured in visionserve.json for detection models only', () => {
    const detection = { postprocess: { kind: 'detection' } };
    const tracking = { kind: 'bytetrack', highScore: 0.6, lowScore: 0.2, maxAge: 10 };
    assert.deepEqual(parseVisionConfig({ ...detection, tracking }).tracking, tracking);
    assert.deepEqual(parseVisionConfig({ ...detection, tracking: {} }).tracking, {});
    for (const bad of [
      { ...detection, tracking: { kind: 'sort' } },
      { ...detection, tracking: { maxAge: -1 } },
      { ...detection, tracking: { lowScore: 0.8, highScore: 0.5 } },
      { ...detection, tracking: { typo: 1 } },
      { postprocess: { kind: 'classification' }, tracking: {} },
      { tracking: {} },
    ]) {
      assert.throws(
        () => parseVisionConfig(bad),
        (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT,
        JSON.stringify(bad),
      );
    }
  });
});
