/**
 * Open Inference Protocol (KServe v2) gRPC ModelInferRequest generators shared by the fuzz
 * targets of the codec (packages/protocol/test/fuzz/kserve-grpc.test.ts) and of the
 * GRPCInferenceService handlers (packages/server/test/fuzz/kserve-grpc-service.test.ts). Not a
 * test file.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { KSERVE_DATATYPES } from '@visionserve/protocol/kserve';
import {
  type InferParameter,
  InferParameterSchema,
  type InferTensorContents,
  InferTensorContentsSchema,
  ModelInferRequestSchema,
  encodeModelInferRequest,
} from '@visionserve/protocol/kserve-proto';
import { aliasArb, concat, hostileStringArb, tensorArb } from './arbitraries.js';

/** Protobuf strings are UTF-8: lone surrogates cannot travel (they become U+FFFD on the way). */
export const protoStringArb = hostileStringArb.map((s) => Buffer.from(s, 'utf8').toString('utf8'));

/** A request as tritonclient sends it: every input's data in raw_input_contents. */
export const grpcRequestInitArb = fc
  .record({
    modelName: fc.oneof(aliasArb, protoStringArb),
    modelVersion: fc.constantFrom('', '1', '2', '99999999999999999999', 'x'),
    id: fc.string({ maxLength: 8 }),
    names: fc.uniqueArray(
      fc.oneof(
        aliasArb,
        protoStringArb.filter((s) => s !== ''),
      ),
      { maxLength: 4 },
    ),
    outputs: fc.uniqueArray(aliasArb, { maxLength: 3 }),
    classification: fc.integer({ min: 0, max: 4 }),
  })
  .chain(({ names, outputs, classification, ...head }) =>
    fc.tuple(...names.map(() => tensorArb({ maxElements: 24 }))).map((tensors) => ({
      ...head,
      inputs: tensors.map((tensor, i) => ({ name: names[i]!, tensor })),
      outputs: outputs.map((name) => ({ name, classification })),
    })),
  );

/** Valid ModelInferRequest bytes as our encoder writes them. */
export const validGrpcRequestArb = grpcRequestInitArb.map((init) => concat(encodeModelInferRequest(init)));

/** Shapes past 2^53 elements, negative, of rank 65. */
const hostileShapeArb = fc.oneof(
  fc.array(fc.bigInt({ min: 0n, max: 4n }), { maxLength: 3 }),
  fc.constantFrom<bigint[]>(
    [-1n],
    [2n ** 62n, 2n ** 62n],
    [2n ** 63n - 1n],
    [0n, 2n ** 60n],
    Array.from({ length: 65 }, () => 1n),
  ),
);

/** An InferParameter of every kind (or none). */
const parameterArb: fc.Arbitrary<InferParameter> = fc
  .oneof(
    fc.boolean().map((value) => ({ case: 'boolParam' as const, value })),
    fc
      .bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
      .map((value) => ({ case: 'int64Param' as const, value })),
    fc.string({ maxLength: 6 }).map((value) => ({ case: 'stringParam' as const, value })),
    fc.double().map((value) => ({ case: 'doubleParam' as const, value })),
    fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((value) => ({ case: 'uint64Param' as const, value })),
    fc.constant({ case: undefined }),
  )
  .map((parameterChoice) => create(InferParameterSchema, { parameterChoice }));

/** Typed contents: any mix of the typed fields. */
export const contentsArb: fc.Arbitrary<InferTensorContents> = fc
  .record(
    {
      boolContents: fc.array(fc.boolean(), { maxLength: 6 }),
      intContents: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 6 }),
      int64Contents: fc.array(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), { maxLength: 6 }),
      uintContents: fc.array(fc.integer({ min: 0, max: 2 ** 32 - 1 }), { maxLength: 6 }),
      uint64Contents: fc.array(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { maxLength: 6 }),
      fp32Contents: fc.array(fc.float(), { maxLength: 6 }),
      fp64Contents: fc.array(fc.double(), { maxLength: 6 }),
      bytesContents: fc.array(fc.uint8Array({ maxLength: 6 }), { maxLength: 6 }),
    },
    { requiredKeys: [] },
  )
  .map((init) => create(InferTensorContentsSchema, init));

/** Messages built field by field with hostile values (protobuf-valid, meaning-invalid). */
export const structuredGrpcRequestArb: fc.Arbitrary<Uint8Array> = fc
  .record({
    inputs: fc.array(
      fc.record({
        name: fc.oneof(fc.constantFrom('x', 'x', ''), hostileStringArb),
        datatype: fc.oneof(
          fc.constantFrom(...KSERVE_DATATYPES),
          fc.constantFrom('fp32', 'TYPE_FP32', '', 'STRING'),
        ),
        shape: hostileShapeArb,
        parameters: fc.dictionary(fc.constantFrom('binary_data_size', 'x', '__proto__'), parameterArb, {
          maxKeys: 2,
        }),
        contents: fc.option(contentsArb, { nil: undefined }),
      }),
      { maxLength: 3 },
    ),
    raw: fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 4 }),
    outputs: fc.array(
      fc.record({
        name: fc.oneof(fc.constantFrom('y', 'y', ''), hostileStringArb),
        parameters: fc.dictionary(fc.constantFrom('classification', 'binary_data'), parameterArb, {
          maxKeys: 2,
        }),
      }),
      { maxLength: 3 },
    ),
    parameters: fc.dictionary(fc.constantFrom('priority', 'timeout', '__proto__'), parameterArb, {
      maxKeys: 2,
    }),
  })
  .map(({ inputs, raw, outputs, parameters }) =>
    toBinary(
      ModelInferRequestSchema,
      create(ModelInferRequestSchema, {
        modelName: 'half',
        inputs: inputs.map((input) => ({
          ...input,
          ...(input.contents === undefined ? {} : { contents: input.contents }),
        })),
        rawInputContents: raw,
        outputs,
        parameters,
      }),
    ),
  );
