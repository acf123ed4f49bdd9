/**
 * Fuzz target: the gRPC-web request decoders (frontends/grpc-web): the base64 body of
 * `application/grpc-web-text` (whole, or concatenated padded chunks as browsers stream it,
 * with line breaks) and the one length-prefixed frame of a unary call (flags, trailers,
 * lying lengths, several frames, oversized declarations).
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Code } from '@visionserve/protocol';
import type { GrpcMethod } from '../../src/frontends/grpc/grpc-service.js';
import { decodeGrpcWebText, readUnaryFrame } from '../../src/frontends/grpc-web/grpc-web-api.js';
import { mutate, mutationArb } from '@visionserve/testkit/arbitraries';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';

const MAX_MESSAGE = 4096;

function frame(flag: number, declared: number, body: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + body.byteLength);
  out[0] = flag;
  out.writeUInt32BE(declared >>> 0, 1);
  out.set(body, 5);
  return out;
}

/** A unary call's body: one well-formed frame, or frames that lie in every way. */
const frameArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => ({ bytes: frame(0, b.length, b), message: b })),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom(0, 0, 1, 0x80, 0x81, 2, 0xff),
        fc.uint8Array({ maxLength: 200 }),
        fc.oneof(fc.integer({ min: -8, max: 8 }), fc.constantFrom(MAX_MESSAGE + 1, 2 ** 31, 2 ** 32 - 1)),
      )
      .map(([flag, b, lie]) => ({
        bytes: frame(flag, lie > 1000 ? lie : Math.max(0, b.length + lie), b),
        message: undefined,
      })),
  },
  {
    weight: 1,
    arbitrary: fc.array(fc.uint8Array({ maxLength: 50 }), { minLength: 2, maxLength: 3 }).map((bodies) => ({
      bytes: Buffer.concat(bodies.map((b) => frame(0, b.length, b))),
      message: undefined,
    })),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ maxLength: 6 }).map((b) => ({ bytes: Buffer.from(b), message: undefined })),
  },
);

const method: GrpcMethod = { handler: () => Promise.resolve([]), alignment: (head) => head.length % 5 };

describe('fuzz: gRPC-web decoding', () => {
  it(
    'grpc-web/frames: text bodies decode to their bytes or INTERNAL; a unary frame gives its message or a gRPC refusal',
    targetOptions('grpc-web/frames'),
    (t) => {
      let messages = 0;
      fuzzSync(
        t,
        'grpc-web/frames',
        fc.property(
          frameArb,
          fc.array(fc.nat(), { maxLength: 3 }),
          fc.constantFrom('', '\r\n', '\n'),
          fc.array(mutationArb, { maxLength: 2 }),
          ({ bytes, message }, cuts, lineBreak, edits) => {
            // Text mode: the frame as base64, whole or as padded chunks, maybe with line breaks.
            const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
            const chunks: Buffer[] = [];
            let from = 0;
            for (const p of [...points, bytes.length]) {
              if (p > from) chunks.push(bytes.subarray(from, p));
              from = Math.max(from, p);
            }
            const text = chunks.map((c) => c.toString('base64')).join(lineBreak);
            const decoded = outcome(() => decodeGrpcWebText(Buffer.from(text, 'latin1')), [Code.INTERNAL]);
            if (!decoded.ok) throw new Error(`valid base64 chunks refused: ${decoded.error.message}`);
            if (!decoded.value.equals(bytes)) throw new Error('text mode changed the bytes');
            const hostileText = mutate(Buffer.from(text, 'latin1'), edits);
            const again = outcome(() => decodeGrpcWebText(hostileText), [Code.INTERNAL]);
            if (again.ok && edits.length === 0 && !again.value.equals(bytes))
              throw new Error('decode is not stable');

            const result = outcome(
              () => readUnaryFrame(bytes, method, MAX_MESSAGE),
              [Code.INTERNAL, Code.UNIMPLEMENTED, Code.RESOURCE_EXHAUSTED],
            );
            if (!result.ok) {
              if (message !== undefined)
                throw new Error(`well-formed frame refused: ${result.error.message}`);
              return;
            }
            messages++;
            const expected = message ?? bytes.subarray(5);
            if (!Buffer.from(result.value.message).equals(Buffer.from(expected))) {
              throw new Error('the message is not the frame payload');
            }
            if (result.value.message.buffer !== result.value.buffer)
              throw new Error('message not in its own buffer');
          },
        ),
        500,
        () => `; ${messages} unary messages read`,
      );
    },
  );
});
