/**
 * Fuzz targets: tf.Example inputs (Classify, Regress, MultiInference and serialized-Example
 * signatures): REST `:classify` / `:regress` bodies, serialized Example messages and `Input`
 * messages, stacked into the model's tensors with TensorFlow's ParseExample rules.
 */
import { describe, it } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import {
  type DType,
  type ExampleFeatureSpec,
  type ExampleInput,
  elementCount,
  examplesToTensors,
  parseTfsExamplesBody,
  parseTfsJsonText,
} from '@visionserve/protocol';
import {
  type Example,
  ExampleSchema,
  type Feature,
  FeatureSchema,
  InputSchema,
  exampleInputFromProto,
  parseSerializedExample,
} from '@visionserve/protocol/tfs-proto';
import { hostileStringArb, mutate, mutationArb, mutatedTextArb } from '@visionserve/testkit/arbitraries';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';

const KEYS = ['x', 'y', 'label', 'image/encoded'] as const;

/** Model-side feature specs: keys from a small pool, every feature kind, fixed and -1 shapes, defaults. */
const specsArb: fc.Arbitrary<ExampleFeatureSpec[]> = fc.uniqueArray(
  fc
    .record({
      key: fc.constantFrom(...KEYS),
      dtype: fc.constantFrom<DType>(
        'float32',
        'float64',
        'int64',
        'int32',
        'uint8',
        'string',
        'bool',
        'float16',
      ),
      shape: fc.oneof<fc.Arbitrary<number[]>[]>(
        fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 2 }),
        fc.constant([-1]),
        fc.constant([2, -1]),
      ),
      withDefault: fc.boolean(),
    })
    .map(({ key, dtype, shape, withDefault }): ExampleFeatureSpec => {
      const n = shape.some((d) => d < 0) ? 0 : elementCount(shape);
      const defaultValue =
        dtype === 'string' ? Array.from({ length: n }, () => 'd') : Array.from({ length: n }, () => 1);
      return { key, dtype, shape, ...(withDefault ? { defaultValue } : {}) };
    }),
  { maxLength: 3, selector: (s) => s.key },
);

/** Feature values as JSON: numbers, strings, b64 objects, lists of them, and wrong types. */
const jsonFeatureArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.array(fc.double(), { maxLength: 6 }),
  fc.array(fc.integer(), { maxLength: 6 }),
  fc.array(fc.string({ maxLength: 4 }), { maxLength: 4 }),
  fc.double(),
  fc.string({ maxLength: 4 }),
  fc.boolean(),
  fc.constantFrom<unknown>(
    { b64: 'aGk=' },
    { b64: 'not base64!' },
    { b64: 1 },
    [{ b64: 'aGk=' }, 'x'],
    [1, 'x'],
    [],
    null,
    {},
    [[1, 2]],
    1e309,
  ),
);

const jsonExampleArb: fc.Arbitrary<Record<string, unknown>> = fc.dictionary(
  fc.oneof(fc.constantFrom(...KEYS), hostileStringArb),
  jsonFeatureArb,
  { maxKeys: 4 },
);

const examplesBodyArb: fc.Arbitrary<string> = mutatedTextArb(
  fc
    .record({
      examples: fc.oneof(
        { weight: 6, arbitrary: fc.array(jsonExampleArb, { maxLength: 4 }) },
        { weight: 1, arbitrary: fc.constantFrom<unknown>(null, {}, 'x', [1], [[]]) },
      ),
      context: fc.option(jsonExampleArb, { nil: undefined }),
      signature_name: fc.option(fc.oneof(fc.string({ maxLength: 6 }), fc.constant(1)), { nil: undefined }),
    })
    .map((body) => JSON.stringify(body)),
  [',', '{', '}', '[', ']', '"', 'NaN', '-Infinity', '{"b64":"', '\u0000'],
);

const featureArb: fc.Arbitrary<Feature> = fc
  .oneof(
    fc.array(fc.float(), { maxLength: 6 }).map((value) => ({ case: 'floatList' as const, value: { value } })),
    fc
      .array(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), { maxLength: 6 })
      .map((value) => ({ case: 'int64List' as const, value: { value } })),
    fc
      .array(fc.uint8Array({ maxLength: 6 }), { maxLength: 4 })
      .map((value) => ({ case: 'bytesList' as const, value: { value } })),
    fc.constant({ case: undefined }),
  )
  .map((kind) => create(FeatureSchema, { kind }));

const exampleArb: fc.Arbitrary<Example> = fc
  .dictionary(fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 4 })), featureArb, { maxKeys: 4 })
  .map((feature) => create(ExampleSchema, { features: { feature } }));

function checkTensors(
  input: ExampleInput,
  specs: readonly ExampleFeatureSpec[],
  out: Record<string, unknown>,
): void {
  for (const spec of specs) {
    const t = out[spec.key] as { dtype: DType; shape: number[]; data: { length: number } } | undefined;
    if (t === undefined) throw new Error(`no tensor for feature ${spec.key}`);
    if (t.dtype !== spec.dtype) throw new Error(`${spec.key}: dtype ${t.dtype}`);
    if (t.shape[0] !== input.examples.length) throw new Error(`${spec.key}: batch ${t.shape[0]}`);
    if (t.data.length !== elementCount(t.shape)) {
      throw new Error(`${spec.key}: ${t.data.length} elements for [${t.shape.join(',')}]`);
    }
    for (let i = 0; i < t.data.length; i++) {
      if ((t.data as unknown as unknown[])[i] === undefined)
        throw new Error(`${spec.key}: element ${i} unset`);
    }
  }
}

/** Bodies whose examples mostly fit `specs` (right kinds and counts), then edited a little. */
function fittingBodyArb(specs: readonly ExampleFeatureSpec[]): fc.Arbitrary<string> {
  const valueArb = (spec: ExampleFeatureSpec, count: number): fc.Arbitrary<unknown> =>
    spec.dtype === 'string'
      ? fc.array(fc.oneof(fc.string({ maxLength: 4 }), fc.constant({ b64: 'aGk=' })), {
          minLength: count,
          maxLength: count,
        })
      : fc.array(
          spec.dtype === 'float32' || spec.dtype === 'float64' || spec.dtype === 'float16'
            ? fc.double()
            : fc.integer({ min: -300, max: 300 }),
          {
            minLength: count,
            maxLength: count,
          },
        );
  const countArb = (spec: ExampleFeatureSpec): fc.Arbitrary<number> =>
    spec.shape.some((d) => d < 0)
      ? fc
          .integer({ min: 0, max: 3 })
          .map((k) => k * Math.max(1, elementCount(spec.shape.map((d) => (d < 0 ? 1 : d)))))
      : fc.oneof(
          { weight: 5, arbitrary: fc.constant(elementCount(spec.shape)) },
          { weight: 1, arbitrary: fc.nat({ max: 5 }) },
        );
  const exampleArb = fc
    .tuple(
      ...specs.map((spec) =>
        fc.tuple(
          fc.boolean(),
          countArb(spec).chain((n) => valueArb(spec, n)),
        ),
      ),
    )
    .map((entries) =>
      Object.fromEntries(
        entries.flatMap(([keep, v], i) =>
          keep || specs[i]!.defaultValue === undefined ? [[specs[i]!.key, v]] : [],
        ),
      ),
    );
  return mutatedTextArb(
    fc.array(exampleArb, { minLength: 1, maxLength: 4 }).map((examples) => JSON.stringify({ examples })),
    [',', ']', '1', '"'],
  );
}

describe('fuzz: tf.Example inputs', () => {
  it(
    'tf-example/json-hostile: any :classify / :regress body stacks into the feature tensors or is INVALID_ARGUMENT',
    targetOptions('tf-example/json-hostile'),
    (t) => {
      let stacked = 0;
      fuzzSync(
        t,
        'tf-example/json-hostile',
        fc.property(
          specsArb.chain((specs) =>
            fc.tuple(
              fc.oneof(
                { weight: 2, arbitrary: fittingBodyArb(specs) },
                { weight: 1, arbitrary: examplesBodyArb },
              ),
              fc.constant(specs),
            ),
          ),
          ([text, specs]) => {
            const result = outcome(() => {
              const body = parseTfsExamplesBody(parseTfsJsonText(text));
              return { input: body.input, tensors: examplesToTensors(body.input, specs) };
            });
            if (!result.ok) return;
            stacked++;
            checkTensors(result.value.input, specs, result.value.tensors);
          },
        ),
        500,
        () => `; ${stacked} stacked`,
      );
    },
  );

  it(
    'tf-example/proto-hostile: mutated Example and Input messages stack into tensors or are INVALID_ARGUMENT',
    targetOptions('tf-example/proto-hostile'),
    (t) => {
      let stacked = 0;
      fuzzSync(
        t,
        'tf-example/proto-hostile',
        fc.property(
          fc.array(exampleArb, { minLength: 1, maxLength: 3 }),
          fc.option(exampleArb, { nil: undefined }),
          fc.array(mutationArb, { maxLength: 3 }),
          fc.boolean(),
          specsArb,
          (examples, context, edits, asInput, specs) => {
            const result = outcome(() => {
              let input: ExampleInput;
              if (asInput) {
                const message = create(InputSchema, {
                  kind:
                    context === undefined
                      ? { case: 'exampleList', value: { examples } }
                      : { case: 'exampleListWithContext', value: { examples, context } },
                });
                const bytes = mutate(toBinary(InputSchema, message), edits);
                let parsed;
                try {
                  parsed = fromBinary(InputSchema, bytes);
                } catch {
                  return undefined; // not an Input at all: the transport refuses it before us
                }
                input = exampleInputFromProto(parsed);
              } else {
                input = {
                  examples: examples.map((e, i) =>
                    parseSerializedExample(
                      i === 0 ? mutate(toBinary(ExampleSchema, e), edits) : toBinary(ExampleSchema, e),
                    ),
                  ),
                };
              }
              return { input, tensors: examplesToTensors(input, specs) };
            });
            if (!result.ok || result.value === undefined) return;
            stacked++;
            checkTensors(result.value.input, specs, result.value.tensors);
          },
        ),
        500,
        () => `; ${stacked} stacked`,
      );
    },
  );
});
