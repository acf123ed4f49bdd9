import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import {
  MOBILENET_V2_VISION_CONFIG,
  TFOD_DETECTOR_VISION_CONFIG,
  classifyTopK,
  decodeDetections,
  labelsFormatFor,
  looksLikeProbabilities,
  parseLabelLines,
  parseLabelMap,
  parseLabels,
  parseVisionConfig,
} from '../src/index.js';

const code =
  (c: Code) =>
  (e: unknown): boolean =>
    e instanceof ServingError && e.code === c;

const tensor = (data: Float32Array, shape: number[]): Tensor => ({ dtype: 'float32', shape, data });

describe('visionserve.json, labels, post-processing', () => {
  it('accepts the documented MobileNetV2 and YOLOX TF-OD configs and refuses typos', () => {
    assert.deepEqual(parseVisionConfig(MOBILENET_V2_VISION_CONFIG), MOBILENET_V2_VISION_CONFIG);
    assert.deepEqual(parseVisionConfig(TFOD_DETECTOR_VISION_CONFIG), TFOD_DETECTOR_VISION_CONFIG);
    for (const bad of [
      { image: { widht: 3 } },
      { image: { width: 224 } },
      { image: { mean: [1, 2] } },
      { image: { resize: 'squash' } },
      { postprocess: { kind: 'segmentation' } },
      { postprocess: { kind: 'detection', topK: 3 } },
      { extra: true },
      [],
    ]) {
      assert.throws(() => parseVisionConfig(bad), code(Code.INVALID_ARGUMENT), JSON.stringify(bad));
    }
  });

  it('reads labels: lines, synset and TF-OD label maps', () => {
    assert.deepEqual(
      [...parseLabelLines('a\nb\n', 'lines')],
      [
        [0, 'a'],
        [1, 'b'],
      ],
    );
    assert.equal(parseLabelLines('n01440764 tench, Tinca tinca\n', 'synset').get(0), 'tench, Tinca tinca');
    const map = parseLabelMap(
      `item { name: "/m/01g317" id: 1 display_name: "person" }
       item { name: "/m/0k4j" id: 3 display_name: "car" }
       item { id: 90 name: "toothbrush" keypoints { id: 0 } }`,
    );
    assert.deepEqual(
      [...map],
      [
        [1, 'person'],
        [3, 'car'],
        [90, 'toothbrush'],
      ],
    );
    assert.throws(() => parseLabelMap('item { id: 1 }'), code(Code.INVALID_ARGUMENT));
    assert.throws(() => parseLabelMap('item { id: 1 name: "a" } item { id: 1 name: "b" }'), /duplicate/);
  });

  it('ranks classes with softmax and labels', () => {
    const scores = { dtype: 'float32' as const, shape: [2, 3], data: Float32Array.of(1, 3, 2, 0, 0, 5) };
    const labels = new Map([
      [0, 'a'],
      [1, 'b'],
    ]);
    const top = classifyTopK(scores, { kind: 'classification', softmax: true, topK: 2 }, labels);
    assert.deepEqual(
      top.map((r) => r.map((c) => c.class_id)),
      [
        [1, 2],
        [2, 0],
      ],
    );
    assert.equal(top[0]![0]!.label, 'b');
    assert.equal(top[1]![0]!.label, undefined);
    assert.ok(Math.abs(top[0]![0]!.score - 0.66524) < 1e-4);
    const raw = classifyTopK(scores, { kind: 'classification', topK: 1, labelOffset: -1 }, labels);
    assert.deepEqual(raw[0], [{ class_id: 1, label: 'a', score: 3 }]);
  });

  it('decodes TF-OD detections with num_detections, threshold and labels', () => {
    const outputs = {
      detection_boxes: {
        dtype: 'float32' as const,
        shape: [1, 3, 4],
        data: Float32Array.of(0.1, 0.2, 0.5, 0.6, 0, 0, 1, 1.2, 0.3, 0.3, 0.4, 0.4),
      },
      detection_classes: { dtype: 'float32' as const, shape: [1, 3], data: Float32Array.of(1, 37, 1) },
      detection_scores: { dtype: 'float32' as const, shape: [1, 3], data: Float32Array.of(0.9, 0.6, 0.55) },
      num_detections: { dtype: 'float32' as const, shape: [1], data: Float32Array.of(2) },
    };
    const labels = new Map([
      [1, 'person'],
      [37, 'sports ball'],
    ]);
    const [result] = decodeDetections(outputs, { kind: 'detection', scoreThreshold: 0.7 }, labels, {
      width: 100,
      height: 50,
    });
    assert.deepEqual(result, {
      num_detections: 1,
      detections: [
        {
          class_id: 1,
          label: 'person',
          score: 0.9,
          box: { ymin: 0.1, xmin: 0.2, ymax: 0.5, xmax: 0.6 },
          box_pixels: { ymin: 5, xmin: 20, ymax: 25, xmax: 60 },
        },
      ],
    });
    // Row 3 is past num_detections; the second row's box is clipped to [0, 1].
    const all = decodeDetections(outputs, { kind: 'detection', scoreThreshold: 0 }, undefined, undefined)[0]!;
    assert.equal(all.num_detections, 2);
    assert.deepEqual(all.detections[1]!.box, { ymin: 0, xmin: 0, ymax: 1, xmax: 1 });
  });
});

describe('label file detection and auto softmax', () => {
  it('detects the format from the name and the content', () => {
    assert.equal(labelsFormatFor('x.pbtxt'), 'label_map');
    assert.equal(labelsFormatFor('labels.txt', undefined, 'item {\n id: 1 name: "a" }'), 'label_map');
    assert.equal(labelsFormatFor('imagenet.txt', undefined, 'n01440764 tench\n'), 'synset');
    assert.equal(labelsFormatFor('labels.txt', undefined, 'cat\ndog\n'), 'lines');
    assert.equal(labelsFormatFor('labels.txt', 'lines', 'n01440764 tench\n'), 'lines');
    assert.equal(
      parseLabels('n01440764 tench, Tinca tinca\nn01443537 goldfish\n', 'imagenet.txt').get(1),
      'goldfish',
    );
    assert.equal(
      parseLabels('item { id: 37 display_name: "sports ball" }', 'map.pbtxt').get(37),
      'sports ball',
    );
  });

  it("softmax 'auto' leaves probabilities alone and normalises logits", () => {
    assert.ok(looksLikeProbabilities([0.2, 0.8]));
    assert.ok(!looksLikeProbabilities([1, 2]));
    const probs = classifyTopK(
      tensor(Float32Array.of(0.2, 0.8), [1, 2]),
      { kind: 'classification', softmax: 'auto', topK: 1 },
      undefined,
    );
    assert.equal(probs[0]![0]!.score, 0.8);
    const logits = classifyTopK(
      tensor(Float32Array.of(0.1, 5, 2, 4), [1, 4]),
      { kind: 'classification', softmax: 'auto', topK: 2 },
      undefined,
    );
    assert.deepEqual(
      logits[0]!.map((c) => c.class_id),
      [1, 3],
    );
    assert.ok(logits[0]![0]!.score > 0.5 && logits[0]![0]!.score < 1);
  });

  it('accepts softmax "auto" in visionserve.json and refuses other strings', () => {
    assert.equal(
      (
        parseVisionConfig({ postprocess: { kind: 'classification', softmax: 'auto' } }).postprocess as {
          softmax?: unknown;
        }
      ).softmax,
      'auto',
    );
    assert.throws(
      () => parseVisionConfig({ postprocess: { kind: 'classification', softmax: 'yes' } }),
      code(Code.INVALID_ARGUMENT),
    );
  });
});
