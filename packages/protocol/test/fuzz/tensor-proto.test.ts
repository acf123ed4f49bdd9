/**
 * Fuzz targets: TensorProto and PredictRequest/PredictResponse protobuf decoding (typed
 * fields, tensor_content at every alignment, the packed-float view fast path, the
 * tensor-offset probe the gRPC transport uses for alignment) and the response writer. The TF
 * Serving gRPC handlers that decode them are fuzzed in packages/server/test/fuzz/tfs-grpc.test.ts.
 */
import { describe, it } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { type Tensor, bytesPerElement, isStringData } from '@visionserve/protocol';
import {
  PredictRequestSchema,
  PredictRequestViewSchema,
  PredictResponseSchema,
  TensorProtoSchema,
  predictRequestIsViewable,
  predictRequestTensorOffset,
  predictRequestViewFrom,
  tensorFromProto,
  tensorFromProtoView,
  tensorToProto,
  writePredictResponse,
} from '@visionserve/protocol/tfs-proto';
import {
  NUMERIC_DTYPES,
  aliasArb,
  concat,
  mutatedBytesArb,
  sameTensor,
  tensorArb,
} from '@visionserve/testkit/arbitraries';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';
import {
  MALFORMED,
  decodeGeneral,
  inputsArb,
  requestBytes,
  sameInputs,
  shifted,
  specArb,
  validRequestArb,
} from '@visionserve/testkit/tfs-requests';

/** What the frontend decodes: the view when viewable, else the general message as a view. */
function decodeFast(bytes: Uint8Array): Record<string, Tensor> {
  let view;
  try {
    view = predictRequestIsViewable(bytes)
      ? fromBinary(PredictRequestViewSchema, bytes)
      : predictRequestViewFrom(fromBinary(PredictRequestSchema, bytes));
  } catch {
    return { [MALFORMED]: { dtype: 'bool', shape: [], data: new Uint8Array(1) } };
  }
  const out: Record<string, Tensor> = {};
  for (const [alias, proto] of Object.entries(view.inputs)) out[alias] = tensorFromProtoView(proto, alias);
  return out;
}

describe('fuzz: TensorProto and PredictRequest decoding', () => {
  it(
    'tensor-proto/round-trip: tensorToProto -> wire -> tensorFromProto is the identity',
    targetOptions('tensor-proto/round-trip'),
    (t) => {
      fuzzSync(
        t,
        'tensor-proto/round-trip',
        fc.property(
          tensorArb(),
          fc.boolean(),
          fc.boolean(),
          fc.integer({ min: 0, max: 7 }),
          (tensor, content, prepack, shift) => {
            const proto = tensorToProto(tensor, { asTensorContent: content, prepackNumbers: prepack });
            const wire = shifted(toBinary(TensorProtoSchema, proto), shift);
            const back = tensorFromProto(fromBinary(TensorProtoSchema, wire), 'x');
            const diff = sameTensor(tensor, back);
            if (diff !== undefined) throw new Error(diff);
          },
        ),
        300,
      );
    },
  );

  it(
    'tensor-proto/prepacked: the pre-packed float_val, double_val and int_val bytes equal protobuf-es encoding',
    targetOptions('tensor-proto/prepacked'),
    (t) => {
      fuzzSync(
        t,
        'tensor-proto/prepacked',
        fc.property(
          tensorArb({ dtypes: ['float32', 'float64', 'int8', 'int16', 'int32', 'uint8', 'uint16'] }),
          (tensor) => {
            const fast = toBinary(
              TensorProtoSchema,
              tensorToProto(tensor, { asTensorContent: false, prepackNumbers: true }),
            );
            const plain = toBinary(TensorProtoSchema, tensorToProto(tensor, { asTensorContent: false }));
            if (Buffer.compare(Buffer.from(fast), Buffer.from(plain)) !== 0) throw new Error('bytes differ');
          },
        ),
        300,
      );
    },
  );

  it(
    'tensor-proto/hostile: mutated TensorProtos decode or fail with INVALID_ARGUMENT',
    targetOptions('tensor-proto/hostile'),
    (t) => {
      const valid = tensorArb().map((tensor) =>
        toBinary(
          TensorProtoSchema,
          tensorToProto(tensor, { asTensorContent: tensor.shape.length % 2 === 0 }),
        ),
      );
      fuzzSync(
        t,
        'tensor-proto/hostile',
        fc.property(mutatedBytesArb(valid), fc.integer({ min: 0, max: 7 }), (bytes, shift) => {
          let proto;
          try {
            proto = fromBinary(TensorProtoSchema, shifted(bytes, shift));
          } catch {
            return; // undecodable wire bytes: the frontends answer INVALID_ARGUMENT for these
          }
          const result = outcome(() => tensorFromProto(proto, 'x'));
          if (result.ok) checkWellFormed(result.value);
        }),
        500,
      );
    },
  );

  it(
    'predict-request/fast-equals-general: the view fast path decodes exactly like the general codec',
    targetOptions('predict-request/fast-equals-general'),
    (t) => {
      fuzzSync(
        t,
        'predict-request/fast-equals-general',
        fc.property(mutatedBytesArb(validRequestArb), fc.integer({ min: 0, max: 7 }), (raw, shift) => {
          const bytes = shifted(raw, shift);
          const general = outcome(() => decodeGeneral(bytes));
          const fast = outcome(() => decodeFast(bytes));
          // Refused: bytes that are no PredictRequest, or a tensor that is INVALID_ARGUMENT (where a
          // path notices the problem may differ: a half double_val is a parse error for one, a
          // tensor error for the other).
          const refused = (r: typeof general): boolean => !r.ok || MALFORMED in r.value;
          // A packed float_val / double_val whose length is not a whole number of values is
          // malformed protobuf: the view refuses it (as TensorFlow's parser does), while
          // protobuf-es reads its last value past the field's end, into the fields after it,
          // and may decode something else entirely. Found by the short campaign's seed at 05f4ebf.
          if (!fast.ok && /holds \d+ bytes, not a whole number of values/.test(fast.error.message)) return;
          if (refused(general) !== refused(fast)) {
            throw new Error(
              `general ${refused(general) ? 'refused' : 'decoded'}, fast ${fast.ok ? (refused(fast) ? 'refused' : 'decoded') : `failed: ${fast.error.message}`}`,
            );
          }
          if (general.ok && fast.ok && !refused(general)) {
            const diff = sameInputs(general.value, fast.value);
            if (diff !== undefined) throw new Error(diff);
            for (const tensor of Object.values(fast.value)) checkWellFormed(tensor);
          }
        }),
        600,
      );
    },
  );

  it(
    'predict-request/round-trip: every request writer decodes back to its inputs',
    targetOptions('predict-request/round-trip'),
    (t) => {
      fuzzSync(
        t,
        'predict-request/round-trip',
        fc.property(
          inputsArb,
          specArb,
          fc.constantFrom('typed' as const, 'content' as const, 'chunks' as const, 'chunks-typed' as const),
          fc.integer({ min: 0, max: 7 }),
          (inputs, spec, mode, shift) => {
            const bytes = shifted(requestBytes(inputs, spec, mode, []), shift);
            const diff = sameInputs(inputs, decodeFast(bytes)) ?? sameInputs(inputs, decodeGeneral(bytes));
            if (diff !== undefined) throw new Error(`${mode}: ${diff}`);
          },
        ),
        300,
      );
    },
  );

  it(
    'predict-request/offset-probe: never throws; points at the tensor bytes of a one-input request',
    targetOptions('predict-request/offset-probe'),
    (t) => {
      const oneInput = fc
        .tuple(aliasArb, tensorArb({ dtypes: NUMERIC_DTYPES }), specArb)
        .filter(([, tensor]) => !isStringData(tensor.data) && tensor.data.byteLength > 0);
      fuzzSync(
        t,
        'predict-request/offset-probe',
        fc.property(
          fc.oneof(
            oneInput.map(([alias, tensor, spec]) => ({
              kind: 'one' as const,
              alias,
              tensor,
              bytes: requestBytes({ [alias]: tensor }, spec, 'chunks', []),
            })),
            mutatedBytesArb(validRequestArb).map((bytes) => ({ kind: 'any' as const, bytes })),
          ),
          fc.nat(),
          (input, cut) => {
            const prefix = input.bytes.subarray(
              0,
              input.kind === 'one' ? input.bytes.length : cut % (input.bytes.length + 1),
            );
            const probed = outcome(() => predictRequestTensorOffset(prefix), []);
            const offset = probed.ok ? probed.value : undefined;
            if (offset !== undefined && (!Number.isSafeInteger(offset) || offset < 0))
              throw new Error(`offset ${offset}`);
            if (input.kind === 'one') {
              const data = input.tensor.data as Exclude<Tensor['data'], readonly Uint8Array[]>;
              const expected = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
              if (offset === undefined) throw new Error('no offset for a one-input tensor_content request');
              const at = Buffer.from(input.bytes.subarray(offset, offset + expected.byteLength));
              if (Buffer.compare(at, expected) !== 0)
                throw new Error(`offset ${offset} does not point at the tensor bytes`);
            }
          },
        ),
        400,
      );
    },
  );

  it(
    'predict-response/writer-equals-protobuf-es: the zero-copy response writer is byte-identical',
    targetOptions('predict-response/writer-equals-protobuf-es'),
    (t) => {
      fuzzSync(
        t,
        'predict-response/writer-equals-protobuf-es',
        fc.property(inputsArb, fc.boolean(), (outputs, content) => {
          const fast = concat(writePredictResponse(outputs, undefined, content));
          const message = create(PredictResponseSchema, {});
          for (const [alias, tensor] of Object.entries(outputs))
            message.outputs[alias] = tensorToProto(tensor, { asTensorContent: content });
          const plain = toBinary(PredictResponseSchema, message);
          if (Buffer.compare(Buffer.from(fast), Buffer.from(plain)) !== 0) throw new Error('bytes differ');
        }),
        300,
      );
    },
  );
});

/** Data length matches the shape and dtype. */
function checkWellFormed(tensor: Tensor): void {
  let n = 1;
  for (const d of tensor.shape) {
    if (!Number.isSafeInteger(d) || d < 0) throw new Error(`bad dimension ${d}`);
    n *= d;
  }
  if (tensor.data.length !== n)
    throw new Error(`${tensor.data.length} elements for shape [${tensor.shape.join(',')}]`);
  if (!isStringData(tensor.data) && tensor.data.byteLength !== n * bytesPerElement(tensor.dtype)) {
    throw new Error('byte length does not match the dtype');
  }
}
