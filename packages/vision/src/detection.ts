/**
 * Detection post-processing for TF Object Detection API style outputs (boxes, classes,
 * scores, num_detections), with label names and pixel boxes: the one implementation
 * for /invocations, the CLI and the client.
 */
import { type Tensor, invalidArgument } from '@visionserve/protocol';
import { numbers, roundFloat32 } from './classification.js';
import type { Labels } from './labels.js';
import type { DetectionPostprocess } from './vision-config.js';

/** Box corners, normalised to [0, 1] of the original image (TF-OD order). */
export interface NormalisedBox {
  readonly ymin: number;
  readonly xmin: number;
  readonly ymax: number;
  readonly xmax: number;
}

export interface Detection {
  readonly class_id: number;
  readonly label?: string;
  readonly score: number;
  readonly box: NormalisedBox;
  /** The box in pixels of the decoded image, when its size is known. */
  readonly box_pixels?: NormalisedBox;
}

export interface DetectionResult {
  readonly num_detections: number;
  readonly detections: Detection[];
}

/** Pixel size of the decoded source image, for `box_pixels`. */
export interface ImageSize {
  readonly width: number;
  readonly height: number;
}

const clamp01 = (v: number): number => Math.min(1, Math.max(0, v));

/**
 * Detections per instance from TF-OD style outputs: `boxes [batch, N, 4]`
 * (`[ymin, xmin, ymax, xmax]`, normalised), `classes [batch, N]`, `scores [batch, N]`
 * and optionally `num_detections [batch]`. Rows at or past num_detections, or
 * scoring below the threshold, are dropped; at most maxDetections remain, in the
 * model's order (TF-OD models sort by score).
 */
export function decodeDetections(
  outputs: Readonly<Record<string, Tensor>>,
  config: DetectionPostprocess,
  labels: Labels | undefined,
  imageSize: ImageSize | undefined,
): DetectionResult[] {
  const names = detectionOutputNames(config);
  const need = (alias: string): Tensor => {
    const t = outputs[alias];
    if (t === undefined) throw invalidArgument(`Detection output "${alias}" is missing`);
    return t;
  };
  const boxesT = need(names.boxes);
  const classesT = need(names.classes);
  const scoresT = need(names.scores);
  const numT = outputs[names.numDetections];
  if (boxesT.shape.length !== 3 || boxesT.shape[2] !== 4) {
    throw invalidArgument(`Detection boxes must be [batch, N, 4]; got [${boxesT.shape.join(',')}]`);
  }
  const [batch, n] = [boxesT.shape[0]!, boxesT.shape[1]!];
  for (const [t, what] of [
    [classesT, 'classes'],
    [scoresT, 'scores'],
  ] as const) {
    if (t.shape.length !== 2 || t.shape[0] !== batch || t.shape[1] !== n) {
      throw invalidArgument(`Detection ${what} must be [${batch}, ${n}]; got [${t.shape.join(',')}]`);
    }
  }
  const boxes = numbers(boxesT, 'detection boxes');
  const classes = numbers(classesT, 'detection classes');
  const scores = numbers(scoresT, 'detection scores');
  const nums = numT === undefined ? undefined : numbers(numT, 'num_detections');
  const threshold = config.scoreThreshold ?? 0.5;
  const max = config.maxDetections ?? 100;
  const offset = config.labelOffset ?? 0;
  const results: DetectionResult[] = [];
  for (let b = 0; b < batch; b++) {
    const valid = Math.min(n, nums === undefined ? n : Math.max(0, Math.floor(nums[b] ?? 0)));
    const detections: Detection[] = [];
    for (let i = 0; i < valid && detections.length < max; i++) {
      const score = scores[b * n + i]!;
      if (!(score >= threshold)) continue;
      const classId = Math.round(classes[b * n + i]!);
      const at = (b * n + i) * 4;
      const box: NormalisedBox = {
        ymin: roundFloat32(clamp01(boxes[at]!)),
        xmin: roundFloat32(clamp01(boxes[at + 1]!)),
        ymax: roundFloat32(clamp01(boxes[at + 2]!)),
        xmax: roundFloat32(clamp01(boxes[at + 3]!)),
      };
      const label = labels?.get(classId + offset);
      detections.push({
        class_id: classId,
        ...(label === undefined ? {} : { label }),
        score: roundFloat32(score),
        box,
        ...(imageSize === undefined
          ? {}
          : {
              box_pixels: {
                ymin: Math.round(box.ymin * imageSize.height),
                xmin: Math.round(box.xmin * imageSize.width),
                ymax: Math.round(box.ymax * imageSize.height),
                xmax: Math.round(box.xmax * imageSize.width),
              },
            }),
      });
    }
    results.push({ num_detections: detections.length, detections });
  }
  return results;
}

/** Output aliases a detection config reads (TF-OD names by default). */
export function detectionOutputNames(config: DetectionPostprocess): {
  boxes: string;
  classes: string;
  scores: string;
  numDetections: string;
} {
  return {
    boxes: config.outputs?.boxes ?? 'detection_boxes',
    classes: config.outputs?.classes ?? 'detection_classes',
    scores: config.outputs?.scores ?? 'detection_scores',
    numDetections: config.outputs?.numDetections ?? 'num_detections',
  };
}
