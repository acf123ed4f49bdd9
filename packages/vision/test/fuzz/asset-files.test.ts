/**
 * Fuzz targets: a model's asset files: TF-OD label maps (protobuf text format) and label
 * files generated in every spelling read back exactly, mutated ones fail with INVALID_ARGUMENT
 * only; any visionserve.json value parses into a config or fails with INVALID_ARGUMENT.
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseLabelMap, parseLabels, parseVisionConfig } from '@visionserve/vision';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';
import { hostileTextArb, literal, message, styleArb, textArb } from '@visionserve/testkit/pbtxt-text';

describe('fuzz: label maps and visionserve.json', () => {
  it(
    'pbtxt/label-map: generated TF-OD label maps read back; mutated ones fail with INVALID_ARGUMENT only',
    targetOptions('pbtxt/label-map'),
    (t) => {
      const items = fc.uniqueArray(
        fc.record({
          id: fc.integer({ min: -5, max: 100_000 }),
          name: textArb(0, 8),
          display: fc.option(textArb(0, 8), { nil: undefined }),
          extra: fc.boolean(),
        }),
        { minLength: 1, maxLength: 5, selector: (i) => i.id },
      );
      const print = fc.tuple(items, styleArb).map(([list, style]) => ({
        items: list,
        text: list
          .map((i) =>
            message(
              'item',
              [
                `name: ${literal(i.name, style)}`,
                `id: ${i.id}`,
                ...(i.display === undefined ? [] : [`display_name: ${literal(i.display, style)}`]),
                ...(i.extra ? ['keypoints { id: 0 label: "nose" }', 'frequency: FREQUENT'] : []),
              ],
              style,
            ),
          )
          .join(style.sep),
      }));
      fuzzSync(
        t,
        'pbtxt/label-map',
        fc.property(
          fc.oneof(
            print,
            hostileTextArb(print.map((p) => p.text)).map((text) => ({ items: undefined, text })),
          ),
          ({ items: list, text }) => {
            const parsed = outcome(() => parseLabelMap(text));
            outcome(() => parseLabels(text, 'labels.pbtxt'));
            outcome(() => parseLabels(text, 'labels.txt'));
            if (list === undefined) return;
            if (!parsed.ok) throw new Error(`generated label map refused: ${parsed.error.message}\n${text}`);
            for (const i of list) {
              if (parsed.value.get(i.id) !== (i.display ?? i.name))
                throw new Error(`id ${i.id} read as ${parsed.value.get(i.id)}`);
            }
          },
        ),
        400,
      );
    },
  );

  it(
    'vision-config/hostile: visionserve.json values parse into a config or fail with INVALID_ARGUMENT',
    targetOptions('vision-config/hostile'),
    (t) => {
      const number = fc.oneof(
        fc.integer({ min: -10, max: 5000 }),
        fc.double(),
        fc.constantFrom(0, 1e9, 2 ** 31, -1, 0.5),
      );
      const image = fc.record(
        {
          preset: fc.constantFrom('imagenet', 'tfod', 'yolox', 'mnist', 'nope', 1),
          width: number,
          height: number,
          resize: fc.constantFrom('stretch', 'crop', 'letterbox', 'fill', 3),
          resizeShorter: number,
          padValue: number,
          layout: fc.constantFrom('NCHW', 'NHWC', 'CHW'),
          dtype: fc.constantFrom('float32', 'uint8', 'int64'),
          channelOrder: fc.constantFrom('RGB', 'BGR', 'RGBA'),
          channels: fc.constantFrom(1, 3, 4, 0),
          scale: number,
          mean: fc.array(number, { maxLength: 4 }),
          std: fc.array(number, { maxLength: 4 }),
          maxInputPixels: number,
          input: fc.string({ maxLength: 5 }),
        },
        { requiredKeys: [] },
      );
      const post = fc.record(
        {
          kind: fc.constantFrom('classification', 'detection', 'segmentation'),
          labels: fc.constantFrom('labels.txt', '../x', '/etc/passwd', ''),
          labelsFormat: fc.constantFrom('lines', 'synset', 'label_map', 'csv'),
          labelOffset: number,
          topK: number,
          scoreThreshold: number,
          maxDetections: number,
          output: fc.string({ maxLength: 5 }),
        },
        { requiredKeys: [] },
      );
      const config = fc.oneof(
        fc.record({ image, postprocess: post }, { requiredKeys: [] }),
        fc.jsonValue({ maxDepth: 3 }),
        fc.record(
          {
            image: fc.jsonValue({ maxDepth: 2 }),
            postprocess: fc.jsonValue({ maxDepth: 2 }),
            extra: fc.jsonValue({ maxDepth: 1 }),
          },
          { requiredKeys: [] },
        ),
      );
      fuzzSync(
        t,
        'vision-config/hostile',
        fc.property(config, (json) => {
          outcome(() => parseVisionConfig(json));
        }),
        500,
      );
    },
  );
});
