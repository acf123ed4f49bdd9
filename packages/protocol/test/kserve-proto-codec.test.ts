import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import {
  ModelInferRequestSchema,
  ModelInferResponseSchema,
  decodeModelInferRequest,
  decodeModelInferResponse,
  encodeModelInferRequest,
  modelInferRequestModel,
  modelInferRequestRawOffset,
  parametersFromProto,
  parametersToProto,
  writeModelInferResponse,
} from '@visionserve/protocol/kserve-proto';

const join = (chunks: readonly Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(chunks));
const f32 = (...v: number[]): Tensor => ({ dtype: 'float32', shape: [v.length], data: Float32Array.from(v) });

const invalid = (pattern: RegExp) => (e: unknown) =>
  e instanceof ServingError && e.code === Code.INVALID_ARGUMENT && pattern.test(e.message);

describe('KServe gRPC ModelInfer codecs', () => {
  it('a request round-trips: raw contents as views, parameters by type, outputs with classification', () => {
    const chunks = encodeModelInferRequest({
      modelName: 'm',
      modelVersion: '2',
      id: 'abc',
      parameters: { flag: true, n: 3, big: 2n ** 60n, ratio: 0.5, s: 'x' },
      inputs: [
        { name: 'a', tensor: f32(1, 2, 3) },
        { name: 's', tensor: { dtype: 'string', shape: [2], data: [Buffer.from('hi'), Buffer.from('')] } },
        { name: 'b', tensor: { dtype: 'uint8', shape: [2], data: Uint8Array.of(1, 0) }, datatype: 'BOOL' },
      ],
      outputs: [{ name: 'y', classification: 3 }, { name: 'z' }],
    });
    // The tensor's own bytes are one of the chunks (not copied).
    assert.ok(chunks.some((c) => c.byteLength === 12 && c.buffer.byteLength === 12));
    const bytes = join(chunks);
    // Standard protobuf decoders read the same message.
    const message = fromBinary(ModelInferRequestSchema, bytes);
    assert.equal(message.rawInputContents.length, 3);
    assert.equal(message.outputs[0]!.parameters['classification']!.parameterChoice.case, 'int64Param');
    const request = decodeModelInferRequest(bytes);
    assert.equal(request.modelName, 'm');
    assert.equal(request.modelVersion, '2');
    assert.equal(request.id, 'abc');
    assert.deepEqual(request.parameters, { flag: true, n: 3, big: 2n ** 60n, ratio: 0.5, s: 'x' });
    assert.deepEqual(Array.from(request.inputs[0]!.tensor.data as Float32Array), [1, 2, 3]);
    const at = modelInferRequestRawOffset(bytes)!;
    assert.equal(
      (request.inputs[0]!.tensor.data as Float32Array).buffer === bytes.buffer,
      at % 4 === 0,
      'a view of the message exactly when aligned',
    );
    assert.deepEqual(
      (request.inputs[1]!.tensor.data as Uint8Array[]).map((b) => Buffer.from(b).toString()),
      ['hi', ''],
    );
    assert.equal(request.inputs[2]!.tensor.dtype, 'bool');
    assert.deepEqual(
      request.outputs?.map((o) => [o.name, o.classification]),
      [
        ['y', 3],
        ['z', 0],
      ],
    );
    assert.equal(
      decodeModelInferRequest(join(encodeModelInferRequest({ modelName: 'm', inputs: [] }))).outputs,
      undefined,
    );
  });

  it('the model a request names is read from a prefix once a later field starts', () => {
    const bytes = join(
      encodeModelInferRequest({
        modelName: 'mobilenet',
        modelVersion: '12',
        inputs: [{ name: 'a', tensor: f32(1) }],
      }),
    );
    assert.deepEqual(modelInferRequestModel(bytes), { name: 'mobilenet', version: '12' });
    // Name and version seen but nothing after them yet: a version could still follow.
    const upToVersion = 2 + 'mobilenet'.length + 2 + 2;
    assert.equal(modelInferRequestModel(bytes.subarray(0, upToVersion)), undefined);
    assert.deepEqual(modelInferRequestModel(bytes.subarray(0, upToVersion + 1)), {
      name: 'mobilenet',
      version: '12',
    });
    for (let cut = 0; cut < upToVersion; cut++)
      assert.equal(modelInferRequestModel(bytes.subarray(0, cut)), undefined);
    const noVersion = join(
      encodeModelInferRequest({ modelName: 'm', inputs: [{ name: 'a', tensor: f32(1) }] }),
    );
    assert.deepEqual(modelInferRequestModel(noVersion), { name: 'm', version: '' });
    // No name, a wrong wire type, a length past the end, garbage: not known.
    assert.equal(
      modelInferRequestModel(
        join(encodeModelInferRequest({ modelName: '', inputs: [{ name: 'a', tensor: f32(1) }] })),
      ),
      undefined,
    );
    assert.equal(modelInferRequestModel(Uint8Array.of(0x08, 0x01, 0x2a, 0x00)), undefined);
    assert.equal(modelInferRequestModel(Uint8Array.of(0x0a, 0x7f, 0x61, 0x2a, 0x00)), undefined);
    assert.equal(
      modelInferRequestModel(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)),
      undefined,
    );
  });

  it('the alignment probe finds the first raw input, from a prefix of the message', () => {
    for (const id of ['', 'a', 'abcdefghijk']) {
      const bytes = join(
        encodeModelInferRequest({ modelName: 'model', id, inputs: [{ name: 'x', tensor: f32(7, 8) }] }),
      );
      const at = modelInferRequestRawOffset(bytes.subarray(0, 64));
      assert.ok(at !== undefined);
      assert.deepEqual(Array.from(new Float32Array(bytes.slice(at, at + 8).buffer)), [7, 8]);
    }
    const bytes = join(
      encodeModelInferRequest({ modelName: 'model', inputs: [{ name: 'x', tensor: f32(1) }] }),
    );
    assert.equal(modelInferRequestRawOffset(bytes.subarray(0, 5)), undefined, 'prefix too short');
    assert.equal(modelInferRequestRawOffset(Uint8Array.of(0xff, 0xff, 0xff)), undefined);
    assert.equal(modelInferRequestRawOffset(Uint8Array.of(0x0f)), undefined, 'bad wire type');
  });

  it('the response writer equals protobuf-es encoding of the same message, outputs as views', () => {
    const y = f32(1.5, -2);
    const chunks = writeModelInferResponse({
      modelName: 'm',
      modelVersion: '3',
      id: 'q',
      outputs: [
        { name: 'y', tensor: y },
        { name: 'empty', tensor: { dtype: 'int32', shape: [0], data: new Int32Array(0) } },
        { name: 's', tensor: { dtype: 'string', shape: [1], data: [Buffer.from('ok')] } },
      ],
    });
    assert.ok(
      chunks.some((c) => c.buffer === (y.data as Float32Array).buffer),
      'numeric output written as a view',
    );
    const bytes = join(chunks);
    const message = fromBinary(ModelInferResponseSchema, bytes);
    assert.deepEqual(Buffer.from(toBinary(ModelInferResponseSchema, message)), Buffer.from(bytes));
    assert.equal(message.rawOutputContents.length, 3, 'one raw entry per output, empty ones included');
    const decoded = decodeModelInferResponse(bytes);
    assert.deepEqual(Array.from(decoded.outputs[0]!.tensor.data as Float32Array), [1.5, -2]);
    assert.deepEqual(decoded.outputs[1]!.tensor.shape, [0]);
    assert.equal(Buffer.from((decoded.outputs[2]!.tensor.data as Uint8Array[])[0]!).toString(), 'ok');
  });

  it('decodes typed response contents too (other servers), and refuses responses without data', () => {
    const bytes = toBinary(
      ModelInferResponseSchema,
      create(ModelInferResponseSchema, {
        outputs: [
          { name: 'a', datatype: 'INT64', shape: [2n], contents: { int64Contents: [-1n, 5n] } },
          { name: 'b', datatype: 'INT8', shape: [1n], contents: { intContents: [-7] } },
        ],
      }),
    );
    const decoded = decodeModelInferResponse(bytes);
    assert.deepEqual(Array.from(decoded.outputs[0]!.tensor.data as BigInt64Array), [-1n, 5n]);
    assert.deepEqual(Array.from(decoded.outputs[1]!.tensor.data as Int8Array), [-7]);
    const missing = toBinary(
      ModelInferResponseSchema,
      create(ModelInferResponseSchema, { outputs: [{ name: 'a', datatype: 'FP32', shape: [1n] }] }),
    );
    assert.throws(() => decodeModelInferResponse(missing), invalid(/no data/));
    assert.throws(() => decodeModelInferResponse(Uint8Array.of(0x0a, 0x05)), invalid(/Malformed/));
  });

  it('request decoding refuses hostile messages before allocating for them', () => {
    const request = (init: Parameters<typeof create<typeof ModelInferRequestSchema>>[1]): Uint8Array =>
      toBinary(ModelInferRequestSchema, create(ModelInferRequestSchema, init));
    const x = { name: 'x', datatype: 'FP32' };
    assert.throws(
      () =>
        decodeModelInferRequest(
          request({ inputs: [{ ...x, shape: [2n ** 62n] }], rawInputContents: [new Uint8Array(4)] }),
        ),
      invalid(/invalid dimension|too many elements/),
    );
    assert.throws(
      () =>
        decodeModelInferRequest(
          request({ inputs: [{ ...x, shape: [3n] }], rawInputContents: [new Uint8Array(4)] }),
        ),
      invalid(/4 bytes of binary data, but FP32 shape \[3\] takes 12/),
    );
    assert.throws(
      () =>
        decodeModelInferRequest(
          request({
            inputs: [{ name: 's', datatype: 'BYTES', shape: [2n] }],
            rawInputContents: [Uint8Array.of(1, 0, 0, 0, 65, 9, 0, 0, 0)],
          }),
        ),
      invalid(/no complete 4-byte length prefix|declares 9 bytes/),
    );
    assert.throws(
      () =>
        decodeModelInferRequest(
          request({ inputs: [{ ...x, shape: [1n], contents: { fp64Contents: [1] } }] }),
        ),
      invalid(/fp64_contents, but datatype FP32/),
    );
    assert.throws(
      () => decodeModelInferRequest(request({ outputs: [{ name: '' }] })),
      invalid(/output 0 needs a name/),
    );
  });

  it('parameters: every InferParameter type both ways', () => {
    const proto = parametersToProto({ a: true, b: 'x', c: 7, d: 1.25, e: -(2n ** 62n) });
    assert.deepEqual(Object.fromEntries(Object.entries(proto).map(([k, v]) => [k, v.parameterChoice.case])), {
      a: 'boolParam',
      b: 'stringParam',
      c: 'int64Param',
      d: 'doubleParam',
      e: 'int64Param',
    });
    assert.deepEqual(parametersFromProto(proto, 'x'), { a: true, b: 'x', c: 7, d: 1.25, e: -(2n ** 62n) });
  });
});
