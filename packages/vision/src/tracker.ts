/**
 * A per-stream object tracker for detection results (pure: no I/O, no clock). Each call of
 * `update` takes one frame's detections and returns them with a `track_id` that stays the
 * same for the same object across frames.
 *
 * ByteTrack-style association (Zhang et al., 2022), with greedy IoU matching instead of the
 * Hungarian algorithm and a constant-velocity box prediction instead of a Kalman filter:
 * 1. detections scoring at least `highScore` are matched to every live track (IoU of the
 *    detection with the track's predicted box at least `iouThreshold`);
 * 2. detections between `lowScore` and `highScore` are matched to the tracks still unmatched
 *    that were seen in the previous frame (IoU at least `lowIouThreshold`): an object whose
 *    score dips (occlusion, blur) keeps its id, and a low-score box never starts a track;
 * 3. unmatched high-score detections start new tracks; a track unseen for more than `maxAge`
 *    frames is dropped. With `kind: 'iou'` there is only step 1 (every detection at or above
 *    `lowScore` is "high"), i.e. plain IoU tracking.
 * Boxes match only boxes of the same class (`class_id`) unless `classAware` is false.
 */
import type { Detection, NormalisedBox } from './detection.js';
import type { TrackerConfig } from './vision-config.js';

/** A detection with the id of its track (absent for a low-score box that matched no track). */
export type TrackedDetection = Detection & { readonly track_id?: number };

interface Track {
  readonly id: number;
  readonly classId: number;
  box: NormalisedBox;
  /** Per-frame motion of the box corners (exponential average). */
  velocity: NormalisedBox;
  /** Frames since the track was last matched (0: matched in the latest frame). */
  missed: number;
}

const ZERO: NormalisedBox = { ymin: 0, xmin: 0, ymax: 0, xmax: 0 };

/** Intersection over union of two boxes (0 for disjoint or empty boxes). */
export function boxIou(a: NormalisedBox, b: NormalisedBox): number {
  const w = Math.min(a.xmax, b.xmax) - Math.max(a.xmin, b.xmin);
  const h = Math.min(a.ymax, b.ymax) - Math.max(a.ymin, b.ymin);
  if (w <= 0 || h <= 0) return 0;
  const inter = w * h;
  const area = (r: NormalisedBox): number => Math.max(0, r.xmax - r.xmin) * Math.max(0, r.ymax - r.ymin);
  const union = area(a) + area(b) - inter;
  return union > 0 ? inter / union : 0;
}

function mapBox(a: NormalisedBox, b: NormalisedBox, f: (x: number, y: number) => number): NormalisedBox {
  return {
    ymin: f(a.ymin, b.ymin),
    xmin: f(a.xmin, b.xmin),
    ymax: f(a.ymax, b.ymax),
    xmax: f(a.xmax, b.xmax),
  };
}

/** Where a track's box should be now: its last box moved by its velocity for every frame since. */
function predicted(track: Track): NormalisedBox {
  const frames = track.missed + 1;
  return mapBox(track.box, track.velocity, (p, v) => p + v * frames);
}

/**
 * Greedy matching: pairs (detection, track) by IoU, best first, each used once; pairs under
 * `minIou` are never made. Returns detection index -> track.
 */
function associate(
  detections: readonly Detection[],
  indices: readonly number[],
  tracks: readonly Track[],
  minIou: number,
  classAware: boolean,
): Map<number, Track> {
  const pairs: { det: number; track: Track; iou: number }[] = [];
  for (const det of indices) {
    const d = detections[det]!;
    for (const track of tracks) {
      if (classAware && track.classId !== d.class_id) continue;
      const iou = boxIou(d.box, predicted(track));
      if (iou >= minIou) pairs.push({ det, track, iou });
    }
  }
  pairs.sort((a, b) => b.iou - a.iou);
  const matched = new Map<number, Track>();
  const used = new Set<Track>();
  for (const p of pairs) {
    if (matched.has(p.det) || used.has(p.track)) continue;
    matched.set(p.det, p.track);
    used.add(p.track);
  }
  return matched;
}

function settings(config: TrackerConfig): Required<TrackerConfig> {
  return {
    kind: config.kind ?? 'bytetrack',
    highScore: config.highScore ?? 0.5,
    lowScore: config.lowScore ?? 0.1,
    iouThreshold: config.iouThreshold ?? 0.3,
    lowIouThreshold: config.lowIouThreshold ?? 0.5,
    maxAge: config.maxAge ?? 30,
    classAware: config.classAware ?? true,
  };
}

export interface Tracker {
  /** One frame's detections, in order, each with its `track_id` where it has one. */
  update(detections: readonly Detection[]): TrackedDetection[];
  /** Tracks alive now (matched within `maxAge` frames). */
  readonly liveTracks: number;
}

/** A tracker for one stream of frames; ids start at 1 and are never reused. */
export function createTracker(config: TrackerConfig = {}): Tracker {
  const s = settings(config);
  let tracks: Track[] = [];
  let nextId = 1;

  const observe = (track: Track, box: NormalisedBox): void => {
    const frames = track.missed + 1;
    const step = mapBox(box, track.box, (now, before) => (now - before) / frames);
    track.velocity = mapBox(track.velocity, step, (v, x) => 0.5 * v + 0.5 * x);
    track.box = box;
    track.missed = 0;
  };

  const update = (detections: readonly Detection[]): TrackedDetection[] => {
    const high: number[] = [];
    const low: number[] = [];
    detections.forEach((d, i) => {
      if (d.score >= s.highScore || (s.kind === 'iou' && d.score >= s.lowScore)) high.push(i);
      else if (d.score >= s.lowScore) low.push(i);
    });
    const ids = new Map<number, number>();
    const first = associate(detections, high, tracks, s.iouThreshold, s.classAware);
    const usedTracks = new Set(first.values());
    const recent = tracks.filter((t) => !usedTracks.has(t) && t.missed === 0);
    const second = associate(detections, low, recent, s.lowIouThreshold, s.classAware);
    for (const [det, track] of [...first, ...second]) {
      observe(track, detections[det]!.box);
      ids.set(det, track.id);
    }
    const matched = new Set([...first.values(), ...second.values()]);
    for (const track of tracks) if (!matched.has(track)) track.missed++;
    tracks = tracks.filter((t) => t.missed <= s.maxAge);
    for (const det of high) {
      if (first.has(det)) continue;
      const d = detections[det]!;
      const track: Track = { id: nextId++, classId: d.class_id, box: d.box, velocity: ZERO, missed: 0 };
      tracks.push(track);
      ids.set(det, track.id);
    }
    return detections.map((d, i) => (ids.has(i) ? { ...d, track_id: ids.get(i)! } : { ...d }));
  };

  return {
    update,
    get liveTracks() {
      return tracks.length;
    },
  };
}

/**
 * Tracks the detections of one /invocations answer for one image (`{"predictions":
 * [{"num_detections", "detections"}]}`): returns a copy whose detections carry their
 * `track_id`. Any other answer (classification, raw outputs, an error) is returned as it is.
 */
export function trackInvocationAnswer(tracker: Tracker, answer: unknown): unknown {
  const predictions = (answer as { predictions?: unknown } | null)?.predictions;
  if (!Array.isArray(predictions) || predictions.length !== 1) return answer;
  const result = predictions[0] as { detections?: unknown } | null;
  if (result === null || typeof result !== 'object' || !Array.isArray(result.detections)) return answer;
  const detections = tracker.update(result.detections as Detection[]);
  return { ...(answer as object), predictions: [{ ...result, detections }] };
}
