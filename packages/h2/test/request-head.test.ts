/**
 * decodeRequestHead (RFC 9113 §8.2-8.3 checks of a request's header block), parseContentLength,
 * and encodeHeaderFrames (a header block as HEADERS + CONTINUATION frames).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  FRAME_HEADER_BYTES,
  Flag,
  FrameType,
  HpackError,
  INVALID_CONTENT_LENGTH,
  createHpackDecoder,
  decodeRequestHead,
  encodeHeaderBlock,
  encodeHeaderFrames,
  parseContentLength,
} from '../src/index.js';

type Fields = [string, string][];

const GRPC_CALL: Fields = [
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', '/tensorflow.serving.PredictionService/Predict'],
  [':authority', 'localhost'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
];

/** An HPACK integer with a 7-bit prefix (RFC 7541 §5.1), the prefix's flag bit clear. */
function int7(value: number): number[] {
  if (value < 0x7f) return [value];
  const out = [0x7f];
  let rest = value - 0x7f;
  for (; rest >= 0x80; rest >>= 7) out.push((rest & 0x7f) | 0x80);
  return [...out, rest];
}

/**
 * Fields as literals without indexing and with new names, written here rather than by
 * encodeHeaderBlock (which refuses the invalid names and values these tests need).
 */
function literalBlock(fields: Fields): Uint8Array {
  const bytes = fields.flatMap(([name, value]) => [
    0x00,
    ...int7(name.length),
    ...Buffer.from(name, 'latin1'),
    ...int7(value.length),
    ...Buffer.from(value, 'latin1'),
  ]);
  return Uint8Array.from(bytes);
}

function head(fields: Fields, options: { selfDependent?: boolean; maxHeaderListBytes?: number } = {}) {
  const decoder = createHpackDecoder({ maxHeaderListBytes: options.maxHeaderListBytes ?? 65536 });
  return decodeRequestHead(decoder, literalBlock(fields), options.selfDependent ?? false);
}

describe('decodeRequestHead', () => {
  it('accepts a gRPC request and joins repeated fields', () => {
    const h = head([...GRPC_CALL, ['x-a', '1'], ['x-a', '2']]);
    assert.deepEqual([h.malformed, h.tooLarge, h.complete], [false, false, true]);
    assert.equal(h.headers[':path'], '/tensorflow.serving.PredictionService/Predict');
    assert.equal(h.headers['x-a'], '1, 2');
  });

  it('is incomplete without :method, :scheme or :path (:authority is optional)', () => {
    for (const missing of [':method', ':scheme', ':path']) {
      const h = head(GRPC_CALL.filter(([n]) => n !== missing));
      assert.equal(h.complete, false, missing);
      assert.equal(h.malformed, false, missing);
    }
    assert.equal(head(GRPC_CALL.filter(([n]) => n !== ':authority')).complete, true);
  });

  it('finds every malformed request of RFC 9113 §8.2-8.3', () => {
    const cases: [string, Fields][] = [
      ['pseudo-header after a regular field', [...GRPC_CALL.slice(0, 2), ['x-a', '1'], GRPC_CALL[2]!]],
      ['unknown pseudo-header', [...GRPC_CALL, [':protocol', 'x']]],
      ['repeated pseudo-header', [GRPC_CALL[0]!, ...GRPC_CALL]],
      ['empty :path', GRPC_CALL.map(([n, v]): [string, string] => [n, n === ':path' ? '' : v])],
      ['upper-case name', [...GRPC_CALL, ['X-Upper', '1']]],
      ['connection field', [...GRPC_CALL, ['connection', 'keep-alive']]],
      ['transfer-encoding', [...GRPC_CALL, ['transfer-encoding', 'chunked']]],
      ['te other than trailers', [...GRPC_CALL.slice(0, 5), ['te', 'gzip']]],
      ['LF in a value', [...GRPC_CALL, ['x-a', 'a\nb']]],
      ['NUL in a value', [...GRPC_CALL, ['x-a', 'a\0b']]],
    ];
    for (const [what, fields] of cases) assert.equal(head(fields).malformed, true, what);
    assert.equal(head(GRPC_CALL, { selfDependent: true }).malformed, true, 'self-dependent priority');
  });

  it('reports a list past the limit as tooLarge and throws on a broken block', () => {
    const h = head([...GRPC_CALL, ['x-big', 'x'.repeat(500)]], { maxHeaderListBytes: 400 });
    assert.equal(h.tooLarge, true);
    const decoder = createHpackDecoder();
    assert.throws(() => decodeRequestHead(decoder, Uint8Array.of(0xff, 0xff, 0xff, 0xff), false), HpackError);
  });
});

describe('parseContentLength', () => {
  it('reads one decimal number, -1 when absent', () => {
    assert.equal(parseContentLength(undefined), -1);
    assert.equal(parseContentLength('0'), 0);
    assert.equal(parseContentLength('600000'), 600000);
    for (const bad of ['', '-1', '1.5', '0x10', '1, 2', ' 1', '1234567890123456'])
      assert.equal(parseContentLength(bad), INVALID_CONTENT_LENGTH, JSON.stringify(bad));
  });
});

/** The frames of a buffer: [type, flags, stream, payload]. */
function frames(out: Buffer): [number, number, number, Buffer][] {
  const result: [number, number, number, Buffer][] = [];
  for (let at = 0; at < out.byteLength;) {
    const length = out.readUIntBE(at, 3);
    const payload = out.subarray(at + FRAME_HEADER_BYTES, at + FRAME_HEADER_BYTES + length);
    result.push([out[at + 3]!, out[at + 4]!, out.readUInt32BE(at + 5), payload]);
    at += FRAME_HEADER_BYTES + length;
  }
  return result;
}

describe('encodeHeaderFrames', () => {
  it('splits a block larger than the frame size into HEADERS and CONTINUATIONs', () => {
    const block = Buffer.from(Array.from({ length: 40 }, (_, i) => i));
    const out = frames(encodeHeaderFrames(7, block, 16, true));
    assert.deepEqual(
      out.map(([type, flags, stream, payload]) => [type, flags, stream, payload.byteLength]),
      [
        [FrameType.HEADERS, Flag.END_STREAM, 7, 16],
        [FrameType.CONTINUATION, 0, 7, 16],
        [FrameType.CONTINUATION, Flag.END_HEADERS, 7, 8],
      ],
    );
    assert.deepEqual(Buffer.concat(out.map(([, , , p]) => p)), block);
  });

  it('writes one HEADERS frame for a block that fits, or an empty one', () => {
    const block = encodeHeaderBlock(GRPC_CALL);
    const [only, ...rest] = frames(encodeHeaderFrames(1, block, 16384, false));
    assert.equal(rest.length, 0);
    assert.deepEqual(only!.slice(0, 3), [FrameType.HEADERS, Flag.END_HEADERS, 1]);
    assert.deepEqual(only![3], Buffer.from(block));
    const empty = frames(encodeHeaderFrames(3, new Uint8Array(0), 16384, true));
    assert.deepEqual(
      empty.map(([t, f, s, p]) => [t, f, s, p.byteLength]),
      [[FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, 3, 0]],
    );
  });
});
