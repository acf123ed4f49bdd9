/**
 * tf.Example messages <-> the plain example data of `tf-example.ts`, and the result
 * messages of Classify / Regress.
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { invalidArgument } from '../errors.js';
import type { TfsClass } from '../tfs-json-examples.js';
import { WireFallback, readExampleFeatures } from './tf-example-wire.js';
import type { ExampleFeatures, ExampleInput, FeatureValues } from '../tf-example.js';
import { type Example, ExampleSchema } from '../gen/tensorflow/core/example/example_pb.js';
import type { Feature } from '../gen/tensorflow/core/example/feature_pb.js';
import {
  type ClassificationResult,
  ClassificationResultSchema,
} from '../gen/tensorflow_serving/apis/classification_pb.js';
import type { Input } from '../gen/tensorflow_serving/apis/input_pb.js';
import {
  type RegressionResult,
  RegressionResultSchema,
} from '../gen/tensorflow_serving/apis/regression_pb.js';

const EMPTY: FeatureValues = { kind: 'float', values: [] };

function featureValues(feature: Feature): FeatureValues {
  const kind = feature.kind;
  switch (kind.case) {
    case 'bytesList':
      return { kind: 'bytes', values: kind.value.value };
    case 'floatList':
      return { kind: 'float', values: kind.value.value };
    case 'int64List':
      return { kind: 'int64', values: kind.value.value };
    default:
      // A feature with no list set: TensorFlow treats it as an empty list of any type.
      return EMPTY;
  }
}

/** The features of an Example message. */
export function exampleFeaturesFromProto(example: Example | undefined): ExampleFeatures {
  const out = new Map<string, FeatureValues>();
  for (const [key, feature] of Object.entries(example?.features?.feature ?? {})) {
    out.set(key, featureValues(feature));
  }
  return out;
}

/**
 * The examples of a request's `Input`. An unset input is INVALID_ARGUMENT `Input is
 * empty.` as in TF Serving.
 */
export function exampleInputFromProto(input: Input | undefined): ExampleInput {
  const kind = input?.kind;
  switch (kind?.case) {
    case 'exampleList':
      return { examples: kind.value.examples.map(exampleFeaturesFromProto) };
    case 'exampleListWithContext':
      return {
        examples: kind.value.examples.map(exampleFeaturesFromProto),
        context: exampleFeaturesFromProto(kind.value.context),
      };
    default:
      return { examples: [] };
  }
}

/**
 * A serialized tf.Example (read off the wire by tf-example-wire.ts; protobuf-es decodes what
 * that reader leaves to it); bytes that do not parse are INVALID_ARGUMENT with TensorFlow's
 * wording `Could not parse example input, value: '...'`.
 */
export function parseSerializedExample(bytes: Uint8Array): ExampleFeatures {
  try {
    return readExampleFeatures(bytes);
  } catch (error) {
    if (!(error instanceof WireFallback)) throw error;
  }
  let example: Example;
  try {
    example = fromBinary(ExampleSchema, bytes);
  } catch {
    const shown = Buffer.from(bytes.subarray(0, 64)).toString('latin1');
    throw invalidArgument(`Could not parse example input, value: '${shown}'`);
  }
  return exampleFeaturesFromProto(example);
}

/** A ClassificationResult message from one list of classes per example. */
export function classificationResultToProto(results: readonly (readonly TfsClass[])[]): ClassificationResult {
  return create(ClassificationResultSchema, {
    classifications: results.map((classes) => ({ classes: classes.map((c) => ({ ...c })) })),
  });
}

/** A RegressionResult message from one value per example. */
export function regressionResultToProto(values: ArrayLike<number>): RegressionResult {
  return create(RegressionResultSchema, {
    regressions: Array.from({ length: values.length }, (_, i) => ({ value: values[i]! })),
  });
}
