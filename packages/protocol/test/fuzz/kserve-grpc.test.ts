/**
 * Fuzz targets: the Open Inference Protocol (KServe v2) gRPC codec: the ModelInferRequest
 * decoder (raw_input_contents, typed contents, shapes, parameters, classification), the
 * raw-contents offset probe the transport aligns with, and the response writer and decoder.
 * The GRPCInferenceService handlers are fuzzed in
 * packages/server/test/fuzz/kserve-grpc-service.test.ts.
 */
import { describe, it } from 'node:test';
import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { type Tensor, elementCount } from '@visionserve/protocol';
import { KSERVE_DATATYPES, binaryOf, datatypeOfDtype, dtypeOfDatatype } from '@visionserve/protocol/kserve';
import {
  ModelInferResponseSchema,
  decodeModelInferRequest,
  decodeModelInferResponse,
  encodeModelInferRequest,
  modelInferRequestRawOffset,
  tensorFromContents,
  writeModelInferResponse,
} from '@visionserve/protocol/kserve-proto';
import {
  aliasArb,
  concat,
  mutate,
  mutatedBytesArb,
  mutationArb,
  sameTensor,
  tensorArb,
} from '@visionserve/testkit/arbitraries';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';
import {
  contentsArb,
  grpcRequestInitArb,
  structuredGrpcRequestArb,
  validGrpcRequestArb,
} from '@visionserve/testkit/kserve-grpc-requests';

function checkDecoded(request: ReturnType<typeof decodeModelInferRequest>): void {
  const names = new Set<string>();
  for (const input of request.inputs) {
    if (names.has(input.name)) throw new Error(`input "${input.name}" decoded twice`);
    names.add(input.name);
    if (input.tensor.dtype !== dtypeOfDatatype(input.datatype)) throw new Error(`${input.datatype}: dtype`);
    if (input.tensor.data.length !== elementCount(input.tensor.shape)) {
      throw new Error(
        `"${input.name}": ${input.tensor.data.length} elements for [${input.tensor.shape.join(',')}]`,
      );
    }
  }
}

describe('fuzz: KServe v2 gRPC codec', () => {
  it(
    'kserve-grpc/request-round-trip: encoded ModelInferRequests decode to the same inputs; the raw offset points at the first input',
    targetOptions('kserve-grpc/request-round-trip'),
    (t) => {
      fuzzSync(
        t,
        'kserve-grpc/request-round-trip',
        fc.property(grpcRequestInitArb, fc.nat(), (init, cut) => {
          const bytes = concat(encodeModelInferRequest(init));
          const decoded = decodeModelInferRequest(bytes);
          if (decoded.modelName !== init.modelName || decoded.modelVersion !== init.modelVersion) {
            throw new Error('model name or version changed');
          }
          if (decoded.id !== init.id) throw new Error('id changed');
          if (decoded.inputs.length !== init.inputs.length) throw new Error('input count');
          init.inputs.forEach((input, i) => {
            const got = decoded.inputs[i]!;
            if (got.name !== input.name) throw new Error(`name ${JSON.stringify(got.name)}`);
            if (got.datatype !== datatypeOfDtype(input.tensor.dtype))
              throw new Error(`datatype ${got.datatype}`);
            const diff = sameTensor(got.tensor, input.tensor);
            if (diff !== undefined) throw new Error(`input "${input.name}": ${diff}`);
          });
          const outputs = decoded.outputs ?? [];
          if (outputs.length !== init.outputs.length) throw new Error('output count');
          init.outputs.forEach((o, i) => {
            if (outputs[i]!.name !== o.name || outputs[i]!.classification !== o.classification) {
              throw new Error(`output ${i}: ${outputs[i]!.name} / ${outputs[i]!.classification}`);
            }
          });
          // The probe: the first raw entry's payload, from the whole message or any prefix.
          const offset = modelInferRequestRawOffset(bytes);
          const first = init.inputs[0];
          if (first !== undefined) {
            const data = binaryOf(first.tensor);
            if (offset === undefined) throw new Error('no raw offset for a request with inputs');
            if (!Buffer.from(bytes.subarray(offset, offset + data.byteLength)).equals(Buffer.from(data))) {
              throw new Error(`offset ${offset} does not point at the first input's data`);
            }
          }
          const prefix = modelInferRequestRawOffset(bytes.subarray(0, cut % (bytes.length + 1)));
          if (prefix !== undefined && prefix !== offset)
            throw new Error(`prefix offset ${prefix} != ${offset}`);
        }),
        400,
      );
    },
  );

  it(
    'kserve-grpc/request-hostile: mutated and meaning-invalid ModelInferRequests decode consistently or are INVALID_ARGUMENT',
    targetOptions('kserve-grpc/request-hostile'),
    (t) => {
      let decodedCount = 0;
      fuzzSync(
        t,
        'kserve-grpc/request-hostile',
        fc.property(fc.oneof(mutatedBytesArb(validGrpcRequestArb), structuredGrpcRequestArb), (bytes) => {
          modelInferRequestRawOffset(bytes); // never throws
          const result = outcome(() => decodeModelInferRequest(bytes));
          if (!result.ok) {
            if (result.error.message.length > 1200) throw new Error('error message is not bounded');
            return;
          }
          decodedCount++;
          checkDecoded(result.value);
          const again = decodeModelInferRequest(
            concat(
              encodeModelInferRequest({
                modelName: result.value.modelName,
                inputs: result.value.inputs.map((i) => ({
                  name: i.name,
                  tensor: i.tensor,
                  datatype: i.datatype,
                })),
              }),
            ),
          );
          result.value.inputs.forEach((input, i) => {
            const diff = sameTensor(again.inputs[i]!.tensor, input.tensor);
            if (diff !== undefined) throw new Error(`re-encoded "${input.name}": ${diff}`);
          });
        }),
        600,
        () => `; ${decodedCount} decoded`,
      );
    },
  );

  it(
    'kserve-grpc/typed-contents: any typed contents for any datatype and shape give that many elements or INVALID_ARGUMENT',
    targetOptions('kserve-grpc/typed-contents'),
    (t) => {
      fuzzSync(
        t,
        'kserve-grpc/typed-contents',
        fc.property(
          fc.constantFrom(...KSERVE_DATATYPES),
          fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 2 }),
          contentsArb,
          (datatype, shape, contents) => {
            const count = elementCount(shape);
            const result = outcome(() => tensorFromContents(datatype, shape, count, contents, 'Input x'));
            if (!result.ok) return;
            if (result.value.dtype !== dtypeOfDatatype(datatype))
              throw new Error(`dtype ${result.value.dtype}`);
            if (result.value.data.length !== count) throw new Error(`${result.value.data.length} elements`);
          },
        ),
        500,
      );
    },
  );

  it(
    'kserve-grpc/response: the written response equals protobuf-es, decodes back, and mutated ones are INVALID_ARGUMENT',
    targetOptions('kserve-grpc/response'),
    (t) => {
      fuzzSync(
        t,
        'kserve-grpc/response',
        fc.property(
          fc
            .uniqueArray(aliasArb, { maxLength: 4 })
            .chain((names) =>
              fc.tuple(fc.constant(names), fc.tuple(...names.map(() => tensorArb({ maxElements: 24 })))),
            ),
          fc.string({ maxLength: 6 }),
          fc.array(mutationArb, { maxLength: 3 }),
          ([names, tensors], id, edits) => {
            const response = {
              modelName: 'm',
              modelVersion: '3',
              id,
              outputs: tensors.map((tensor: Tensor, i) => ({ name: names[i]!, tensor })),
            };
            const bytes = concat(writeModelInferResponse(response));
            const reference = toBinary(
              ModelInferResponseSchema,
              create(ModelInferResponseSchema, {
                modelName: 'm',
                modelVersion: '3',
                id,
                outputs: response.outputs.map((o) => ({
                  name: o.name,
                  datatype: datatypeOfDtype(o.tensor.dtype),
                  shape: o.tensor.shape.map(BigInt),
                })),
                rawOutputContents: response.outputs.map((o) => binaryOf(o.tensor)),
              }),
            );
            if (!Buffer.from(bytes).equals(Buffer.from(reference)))
              throw new Error('bytes differ from protobuf-es');
            const decoded = decodeModelInferResponse(bytes);
            response.outputs.forEach((o, i) => {
              const diff = sameTensor(decoded.outputs[i]!.tensor, o.tensor);
              if (diff !== undefined) throw new Error(`output ${i}: ${diff}`);
            });
            outcome(() => decodeModelInferResponse(mutate(bytes, edits)));
          },
        ),
        400,
      );
    },
  );
});
