import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type DType, type Tensor, allocate } from '@visionserve/protocol';
import { writePredictResponse } from '@visionserve/protocol/tfs-proto';
import { decodeModelInferResponse, writeModelInferResponse } from '@visionserve/protocol/kserve-proto';
import { Code, ServingError } from '../src/index.js';
import { createResponseReceiver, PLACE_MIN_BYTES } from '../src/grpc-response-receiver.js';
import { createMessageAssembler } from '../src/grpc-message-assembler.js';
import { modelInferResponsePadding, predictResponsePadding } from '../src/response-placement.js';
import { decodePredictResponse } from '../src/tfs-grpc-codec.js';

/** A small seeded PRNG (mulberry32), so failures reproduce. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SPEC = { name: 'm', version: undefined, label: undefined, signatureName: undefined };

const concat = (parts: readonly Uint8Array[]): Uint8Array => Buffer.concat(parts);

/** The message behind its 5-byte prefix (`declared` overrides the length it states). */
function framed(message: Uint8Array, flag = 0, declared = message.byteLength): Uint8Array {
  const out = new Uint8Array(5 + message.byteLength);
  out[0] = flag;
  new DataView(out.buffer).setUint32(1, declared);
  out.set(message, 5);
  return out;
}

/** `bytes` cut at random points into chunks of 1..maxChunk bytes (odd boundaries included). */
function chunked(bytes: Uint8Array, random: () => number, maxChunk: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let at = 0; at < bytes.byteLength;) {
    const n = 1 + Math.floor(random() * maxChunk);
    out.push(bytes.subarray(at, at + n));
    at += n;
  }
  return out;
}

/** Feeds the chunks; the first push error, or end()'s answer. */
function receive(
  chunks: readonly Uint8Array[],
  options: Parameters<typeof createResponseReceiver>[0] = { maxReceiveBytes: 2 ** 31 - 1 },
): Uint8Array | ServingError {
  const receiver = createResponseReceiver(options);
  for (const c of chunks) {
    const error = receiver.push(c);
    if (error) return error;
  }
  return receiver.end();
}

const code = (result: Uint8Array | ServingError): Code | undefined =>
  result instanceof ServingError ? result.code : undefined;

function randomTensor(dtype: Exclude<DType, 'string'>, shape: number[], random: () => number): Tensor {
  const data = allocate(
    dtype,
    shape.reduce((a, b) => a * b, 1),
  );
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  if (dtype === 'bool') for (let i = 0; i < bytes.length; i++) bytes[i]! &= 1;
  return { dtype, shape, data };
}

const DTYPES: readonly Exclude<DType, 'string'>[] = [
  'float32',
  'float64',
  'int8',
  'uint8',
  'int16',
  'int32',
  'int64',
  'float16',
  'uint32',
];

/** Random outputs: one large (above the placement threshold) among small ones, in random order. */
function randomOutputs(random: () => number): Record<string, Tensor> {
  const outputs: Record<string, Tensor> = {};
  const count = 1 + Math.floor(random() * 4);
  const big = Math.floor(random() * count);
  for (let i = 0; i < count; i++) {
    const dtype = DTYPES[Math.floor(random() * DTYPES.length)]!;
    const elements = i === big ? 20_000 + Math.floor(random() * 40_000) : 1 + Math.floor(random() * 3000);
    // Odd-length names shift the payload offsets by odd amounts.
    outputs[`out_${'x'.repeat(Math.floor(random() * 7))}${i}`] = randomTensor(dtype, [elements], random);
  }
  return outputs;
}

const bytesOf = (t: Tensor): Buffer => {
  const d = t.data as Exclude<Tensor['data'], readonly Uint8Array[]>;
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
};

describe('gRPC response receiver', () => {
  it('reassembles messages split at odd boundaries, byte for byte, with and without placement', () => {
    const random = seeded(1);
    for (let round = 0; round < 40; round++) {
      const length = round % 4 === 0 ? Math.floor(random() * 100) : Math.floor(random() * 300_000);
      const message = new Uint8Array(length).map(() => Math.floor(random() * 256));
      const pad = Math.floor(random() * 8);
      const maxChunk = [1, 3, 17, 16_384, 70_001][round % 5]!;
      for (const responsePadding of [undefined, () => pad]) {
        const got = receive(chunked(framed(message), random, maxChunk), {
          maxReceiveBytes: 1 << 20,
          ...(responsePadding ? { responsePadding } : {}),
        });
        assert.ok(got instanceof Uint8Array, `round ${round}: ${String(got)}`);
        assert.ok(Buffer.from(got).equals(message), `round ${round}: bytes differ`);
        if (responsePadding && length >= PLACE_MIN_BYTES) assert.equal(got.byteOffset, pad);
      }
    }
  });

  it('asks for placement once, with the whole message; undefined places at 0', () => {
    const message = new Uint8Array(200_000).map((_, i) => (i * 31 + 7) & 0xff);
    const seen: number[] = [];
    const got = receive(chunked(framed(message), seeded(2), 5000), {
      maxReceiveBytes: 1 << 20,
      responsePadding: (frames, start, length) => {
        assert.equal(start, 0);
        assert.equal(length, message.byteLength);
        seen.push(frames.reduce((n, f) => n + f.byteLength, 0));
        return 5;
      },
    });
    assert.ok(got instanceof Uint8Array);
    assert.equal(got.byteOffset, 5);
    assert.ok(Buffer.from(got).equals(message));
    assert.deepEqual(seen, [message.byteLength]);
    const never = receive(chunked(framed(message), seeded(3), 5000), {
      maxReceiveBytes: 1 << 20,
      responsePadding: () => undefined,
    });
    assert.ok(never instanceof Uint8Array && never.byteOffset === 0 && Buffer.from(never).equals(message));
  });

  it('answers a whole small message in one chunk with a view of it, and empty messages', () => {
    const chunk = framed(new Uint8Array([1, 2, 3]));
    const got = receive([chunk]);
    assert.ok(got instanceof Uint8Array);
    assert.equal(got.buffer, chunk.buffer);
    assert.deepEqual([...got], [1, 2, 3]);
    const empty = receive([framed(new Uint8Array(0))]);
    assert.ok(empty instanceof Uint8Array && empty.byteLength === 0);
  });

  it('refuses a declared length above the limit as soon as the prefix arrives', () => {
    const receiver = createResponseReceiver({ maxReceiveBytes: 1000 });
    const prefix = framed(new Uint8Array(0), 0, 1001);
    assert.equal(receiver.push(prefix.subarray(0, 3)), undefined);
    const error = receiver.push(prefix.subarray(3));
    assert.ok(error instanceof ServingError);
    assert.equal(error.code, Code.RESOURCE_EXHAUSTED);
    assert.match(error.message, /larger than max \(1001 vs\. 1000\)/);
    // At the limit is fine.
    assert.ok(receive([framed(new Uint8Array(1000))], { maxReceiveBytes: 1000 }) instanceof Uint8Array);
    // A huge declared length is refused without allocating it.
    assert.equal(code(receive([framed(new Uint8Array(0), 0, 0xffffffff)])), Code.RESOURCE_EXHAUSTED);
  });

  it('reports truncated, compressed and extra bytes clearly', () => {
    const message = new Uint8Array(100_000).fill(9);
    const whole = framed(message);
    const random = seeded(4);
    for (const responsePadding of [undefined, () => 3, () => undefined]) {
      const options = { maxReceiveBytes: 1 << 20, ...(responsePadding ? { responsePadding } : {}) };
      for (const cut of [1, 4, 5, 6, 70_000, whole.byteLength - 1]) {
        const got = receive(chunked(whole.subarray(0, cut), random, 20_000), options);
        assert.equal(code(got), Code.INTERNAL, `cut at ${cut}`);
        assert.match((got as ServingError).message, cut < 5 ? /5-byte message prefix/ : /ended after \d+ of/);
      }
      assert.match((receive([], options) as ServingError).message, /carried no message/);
      const extra = concat([whole, new Uint8Array([0, 0, 0, 0, 0])]);
      const got = receive(chunked(extra, random, 30_000), options);
      assert.equal(code(got), Code.INTERNAL);
      assert.match((got as ServingError).message, /more than one message/);
      assert.equal(code(receive([framed(message, 1)], options)), Code.UNIMPLEMENTED);
    }
    assert.equal(code(receive([framed(new Uint8Array([1]), 0), new Uint8Array([2])])), Code.INTERNAL);
  });
});

describe('response placement on partly received messages', () => {
  it('PredictResponse: decodes what the contiguous message decodes, largest tensor as an aligned view', () => {
    const random = seeded(5);
    for (let round = 0; round < 30; round++) {
      const outputs = randomOutputs(random);
      const asTensorContent = random() < 0.7;
      const message = concat(writePredictResponse(outputs, undefined, asTensorContent));
      const got = receive(chunked(framed(message), random, [7, 1000, 16_384][round % 3]!), {
        maxReceiveBytes: 1 << 24,
        responsePadding: predictResponsePadding,
      });
      assert.ok(got instanceof Uint8Array);
      assert.ok(Buffer.from(got).equals(message));
      const expected = decodePredictResponse(message, SPEC).outputs;
      const decoded = decodePredictResponse(got, SPEC).outputs;
      assert.deepEqual(Object.keys(decoded), Object.keys(expected));
      let largest = '';
      for (const [name, t] of Object.entries(decoded)) {
        assert.equal(t.dtype, expected[name]!.dtype);
        assert.deepEqual(t.shape, expected[name]!.shape);
        assert.ok(bytesOf(t).equals(bytesOf(expected[name]!)), `round ${round}: ${name} differs`);
        assert.ok(bytesOf(t).equals(bytesOf(outputs[name]!)));
        if (largest === '' || bytesOf(t).byteLength > bytesOf(decoded[largest]!).byteLength) largest = name;
      }
      const view = decoded[largest]!.data as Exclude<Tensor['data'], readonly Uint8Array[]>;
      // The largest tensor_content (wire size = data size): no copy.
      if (asTensorContent) {
        assert.equal(view.buffer, got.buffer, `round ${round}: largest output was copied`);
      }
    }
  });

  it('ModelInferResponse: decodes what the contiguous message decodes, largest raw output as an aligned view', () => {
    const random = seeded(6);
    for (let round = 0; round < 30; round++) {
      const outputs = Object.entries(randomOutputs(random)).map(([name, tensor]) => ({ name, tensor }));
      const message = concat(
        writeModelInferResponse({
          modelName: 'm'.repeat(1 + Math.floor(random() * 9)),
          modelVersion: '1',
          id: 'i'.repeat(Math.floor(random() * 5)),
          outputs,
        }),
      );
      const got = receive(chunked(framed(message), random, [5, 999, 16_384][round % 3]!), {
        maxReceiveBytes: 1 << 24,
        responsePadding: modelInferResponsePadding,
      });
      assert.ok(got instanceof Uint8Array);
      assert.ok(Buffer.from(got).equals(message));
      const expected = decodeModelInferResponse(message).outputs;
      const decoded = decodeModelInferResponse(got).outputs;
      assert.equal(decoded.length, expected.length);
      let largest = 0;
      decoded.forEach((o, i) => {
        assert.equal(o.name, expected[i]!.name);
        assert.deepEqual(o.tensor.shape, expected[i]!.tensor.shape);
        assert.ok(bytesOf(o.tensor).equals(bytesOf(expected[i]!.tensor)), `round ${round}: ${o.name}`);
        if (bytesOf(o.tensor).byteLength > bytesOf(decoded[largest]!.tensor).byteLength) largest = i;
      });
      const view = decoded[largest]!.tensor.data as Exclude<Tensor['data'], readonly Uint8Array[]>;
      assert.equal(view.buffer, got.buffer, `round ${round}: largest output was copied`);
    }
  });

  it('decides from the first part of the message when the largest payload comes first', () => {
    const big = randomTensor('float32', [50_000], seeded(7));
    const small = randomTensor('float32', [10], seeded(8));
    const message = concat(writePredictResponse({ big, small }, undefined, true));
    // Headers only: the big payload has not arrived, and nothing after it can be larger.
    const pad = predictResponsePadding([message.subarray(0, 64)], 0, message.byteLength);
    assert.equal(typeof pad, 'number');
    // The small one first: undecided until the big one's header is in.
    const reversed = concat(writePredictResponse({ small, big }, undefined, true));
    assert.equal(predictResponsePadding([reversed.subarray(0, 30)], 0, reversed.byteLength), undefined);
    assert.equal(
      typeof predictResponsePadding([reversed.subarray(0, 140)], 0, reversed.byteLength),
      'number',
    );
  });

  it('answers 0 for malformed messages and never reads past the stated length', () => {
    const random = seeded(9);
    for (let i = 0; i < 300; i++) {
      const bytes = new Uint8Array(1 + Math.floor(random() * 200)).map(() => Math.floor(random() * 256));
      for (const place of [predictResponsePadding, modelInferResponsePadding]) {
        const pad = place([bytes], 0, bytes.byteLength);
        assert.ok(pad === undefined || (pad >= 0 && pad < 8));
        // Given the whole message, it always decides.
        const whole = place([bytes, new Uint8Array(50).fill(0xff)], 0, bytes.byteLength);
        assert.ok(whole !== undefined && whole >= 0 && whole < 8, `decided ${String(whole)}`);
      }
    }
  });
});

/**
 * The lean channel's assembler, fed the way its connection feeds it: every chunk copied into
 * one scratch buffer that is overwritten after each push, or (where `target` offers a view)
 * written straight into that view and pushed as it is.
 */
function assemble(
  bytes: Uint8Array,
  random: () => number,
  maxChunk: number,
  options: Parameters<typeof createMessageAssembler>[0],
): { result: Uint8Array | ServingError; direct: number } {
  const assembler = createMessageAssembler(options);
  const scratch = Buffer.alloc(maxChunk);
  let direct = 0;
  for (let at = 0; at < bytes.byteLength;) {
    const want = Math.min(1 + Math.floor(random() * maxChunk), bytes.byteLength - at);
    // The target only ever covers message bytes: never the 5-byte prefix.
    const target = at >= 5 ? assembler.target(want) : undefined;
    let chunk: Uint8Array;
    if (target !== undefined) {
      target.set(bytes.subarray(at, at + target.byteLength));
      chunk = target;
      direct++;
    } else {
      scratch.set(bytes.subarray(at, at + want));
      chunk = scratch.subarray(0, want);
    }
    at += chunk.byteLength;
    const error = assembler.push(chunk);
    if (error) return { result: error, direct };
    scratch.fill(0xee);
  }
  return { result: assembler.end(), direct };
}

describe('gRPC message assembler (lean channel)', () => {
  it('assembles from a reused scratch buffer and in-place targets, placed as the message tells', () => {
    const random = seeded(11);
    for (let round = 0; round < 30; round++) {
      const outputs = randomOutputs(random);
      const message = concat(writePredictResponse(outputs, undefined, random() < 0.7));
      const { result, direct } = assemble(framed(message), random, [7, 1000, 16_384, 70_001][round % 4]!, {
        maxReceiveBytes: 1 << 24,
        responsePadding: predictResponsePadding,
      });
      assert.ok(result instanceof Uint8Array, String(result));
      assert.ok(Buffer.from(result).equals(message), `round ${round}: bytes differ`);
      if (message.byteLength > 100_000 && round % 4 !== 0)
        assert.ok(direct > 0, `round ${round}: no direct read`);
      const decoded = decodePredictResponse(result, SPEC).outputs;
      for (const [name, t] of Object.entries(decoded)) assert.ok(bytesOf(t).equals(bytesOf(outputs[name]!)));
    }
  });

  it('refuses compressed, oversized, truncated and extra bytes like the receiver', () => {
    const random = seeded(12);
    const options = { maxReceiveBytes: 100_000 };
    const big = new Uint8Array(90_000);
    assert.equal(code(assemble(framed(big, 1), random, 1000, options).result), Code.UNIMPLEMENTED);
    assert.equal(
      code(assemble(framed(new Uint8Array(100_001)), random, 1000, options).result),
      Code.RESOURCE_EXHAUSTED,
    );
    const truncated = assemble(framed(big, 0, 95_000), random, 1000, options).result;
    assert.ok(
      truncated instanceof ServingError && /ended after 90000 of the message's 95000/.test(truncated.message),
    );
    const extra = assemble(framed(big, 0, 80_000), random, 1000, options).result;
    assert.ok(extra instanceof ServingError && /more than one message/.test(extra.message));
    assert.equal(code(assemble(new Uint8Array(3), random, 1000, options).result), Code.INTERNAL);
    const empty = assemble(framed(new Uint8Array(0)), random, 1000, options).result;
    assert.ok(empty instanceof Uint8Array && empty.byteLength === 0);
  });
});
