/**
 * Fuzz targets for the HPACK codec (packages/h2/src/, @visionserve/h2):
 * - hpack/round-trip: any header list (latin1 values, static and new names) encoded by
 *   encodeHeaderBlock decodes to the same list, on a fresh decoder and on one whose dynamic
 *   table is in use; Huffman coding of any latin1 text decodes back.
 * - hpack/hostile: sequences of header blocks on one decoder (valid blocks with indexing and
 *   Huffman, byte edits of them, raw random bytes): each block decodes or throws HpackError /
 *   HeaderListTooLargeError only, within HANG_MS, handing out at most the list limit.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  createHpackDecoder,
  encodeHeaderBlock,
  HeaderListTooLargeError,
  HpackError,
  decodeHuffman,
  encodeHuffman,
  huffmanEncodedLength,
} from '@visionserve/h2';
import { mutate, mutationArb } from '@visionserve/testkit/arbitraries';
import { HANG_MS, fuzzSync, targetOptions } from '@visionserve/testkit/campaign';

type Fields = (readonly [string, string])[];

const NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-_.!#$%&'*+^`|~";
const nameArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    ':path',
    ':status',
    ':authority',
    'content-type',
    'user-agent',
    'grpc-timeout',
    'te',
    'www-authenticate',
  ),
  fc.stringMatching(/^[a-z0-9-]{1,12}$/),
  fc
    .array(fc.constantFrom(...NAME_CHARS.split('')), { minLength: 1, maxLength: 200 })
    .map((chars) => chars.join('')),
);
/** Latin1 text without NUL, CR and LF (what encodeHeaderBlock accepts in a value). */
const valueArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('', 'POST', '200', '/', 'gzip, deflate', 'application/grpc', 'trailers'),
  fc
    .array(
      fc.integer({ min: 0, max: 255 }).filter((c) => c !== 0 && c !== 10 && c !== 13),
      { maxLength: 300 },
    )
    .map((codes) => String.fromCharCode(...codes)),
);
const fieldsArb: fc.Arbitrary<Fields> = fc.array(fc.tuple(nameArb, valueArb), { maxLength: 20 });

function decodeAll(decoder: ReturnType<typeof createHpackDecoder>, block: Uint8Array): Fields {
  const fields: Fields = [];
  decoder.decode(block, (name, value) => fields.push([name, value]));
  return fields;
}

function stringLiteral(text: string, huffman: boolean): number[] {
  if (!huffman) return [...hpackInt(text.length, 7, 0), ...Buffer.from(text, 'latin1')];
  const out = new Uint8Array(huffmanEncodedLength(text));
  encodeHuffman(text, out, 0);
  return [...hpackInt(out.length, 7, 0x80), ...out];
}

/** One field representation of any kind (RFC 7541 §6), with indices that may or may not exist. */
const representationArb: fc.Arbitrary<number[]> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .oneof(fc.integer({ min: 1, max: 61 }), fc.integer({ min: 62, max: 72 }))
      .map((index) => hpackInt(index, 7, 0x80)),
  },
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        fc.constantFrom([6, 0x40] as const, [4, 0x00] as const, [4, 0x10] as const),
        fc.oneof(
          { weight: 2, arbitrary: fc.constant(0) },
          { weight: 2, arbitrary: fc.integer({ min: 1, max: 61 }) },
          fc.integer({ min: 62, max: 64 }),
        ),
        nameArb,
        valueArb,
        fc.boolean(),
        fc.boolean(),
      )
      .map(([[bits, high], index, name, value, huffName, huffValue]) => [
        ...hpackInt(index, bits, high),
        ...(index === 0 ? stringLiteral(name, huffName) : []),
        ...stringLiteral(value, huffValue),
      ]),
  },
  // A size update: allowed only before the first field, so mostly an error here.
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 5000 }).map((size) => hpackInt(size, 5, 0x20)) },
);
/** Size updates at the start of a block: mostly within `maxTableBytes`, sometimes one past it. */
const sizeUpdatesArb = (maxTableBytes: number): fc.Arbitrary<number[]> =>
  fc
    .array(
      fc.oneof(
        { weight: 6, arbitrary: fc.integer({ min: 0, max: maxTableBytes }) },
        fc.constant(maxTableBytes + 1),
      ),
      { maxLength: 2 },
    )
    .map((sizes) => sizes.flatMap((size) => hpackInt(size, 5, 0x20)));
const blockArb = (maxTableBytes: number): fc.Arbitrary<Uint8Array> =>
  fc
    .tuple(sizeUpdatesArb(maxTableBytes), fc.array(representationArb, { maxLength: 8 }))
    .map(([updates, parts]) => Uint8Array.from([...updates, ...parts.flat()]));
const hostileBlockArb = (maxTableBytes: number): fc.Arbitrary<Uint8Array> =>
  fc.oneof(
    { weight: 6, arbitrary: blockArb(maxTableBytes) },
    {
      weight: 6,
      arbitrary: fc
        .tuple(blockArb(maxTableBytes), fc.array(mutationArb, { minLength: 1, maxLength: 4 }))
        .map(([b, m]) => mutate(b, m)),
    },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 300 }) },
  );

describe('fuzz: HPACK', () => {
  it(
    'hpack/round-trip: encodeHeaderBlock and Huffman coding decode back exactly',
    targetOptions('hpack/round-trip'),
    (t) => {
      fuzzSync(
        t,
        'hpack/round-trip',
        fc.property(fieldsArb, fieldsArb, (warmup, fields) => {
          // A decoder whose dynamic table holds the warm-up fields (literals with incremental indexing).
          const used = createHpackDecoder({ maxHeaderListBytes: 1 << 30 });
          decodeAll(
            used,
            Uint8Array.from(
              warmup.flatMap(([n, v]) => [0x40, ...stringLiteral(n, true), ...stringLiteral(v, false)]),
            ),
          );
          const block = encodeHeaderBlock(fields);
          assert.deepEqual(decodeAll(createHpackDecoder({ maxHeaderListBytes: 1 << 30 }), block), fields);
          assert.deepEqual(decodeAll(used, block), fields);
          for (const [, value] of fields) {
            const out = new Uint8Array(huffmanEncodedLength(value));
            assert.equal(encodeHuffman(value, out, 0), out.length);
            assert.equal(decodeHuffman(out, 0, out.length), value);
          }
        }),
        1000,
      );
    },
  );

  it(
    'hpack/hostile: any block sequence decodes or throws HpackError / HeaderListTooLargeError',
    targetOptions('hpack/hostile'),
    (t) => {
      let decoded = 0;
      const malformed = new Map<string, number>();
      let tooLarge = 0;
      fuzzSync(
        t,
        'hpack/hostile',
        fc.property(
          fc
            .constantFrom(0, 64, 256, 4096, 4096, 4096)
            .chain((max) =>
              fc.tuple(fc.constant(max), fc.array(hostileBlockArb(max), { minLength: 1, maxLength: 6 })),
            ),
          fc.constantFrom(64, 1024, 65536),
          fc.integer({ min: 0, max: 6 }),
          ([maxTableBytes, blocks], maxHeaderListBytes, ackBefore) => {
            const decoder = createHpackDecoder({ maxTableBytes, maxHeaderListBytes });
            let acknowledged = false;
            for (const [k, block] of blocks.entries()) {
              if (k === ackBefore) {
                decoder.settingsAcknowledged();
                acknowledged = true;
              }
              let listBytes = 0;
              const start = performance.now();
              try {
                decoder.decode(block, (name, value) => {
                  assert.equal(typeof name, 'string');
                  assert.equal(typeof value, 'string');
                  listBytes += name.length + value.length + 32;
                });
                decoded++;
              } catch (error) {
                if (error instanceof HeaderListTooLargeError) {
                  tooLarge++;
                  continue;
                }
                if (!(error instanceof HpackError)) throw error;
                const kind = error.message.replace(/\d+/g, 'N');
                malformed.set(kind, (malformed.get(kind) ?? 0) + 1);
                // After an HpackError the connection ends: this decoder is done.
                return;
              } finally {
                assert.ok(listBytes <= maxHeaderListBytes, `${listBytes} bytes of fields handed out`);
                assert.ok(performance.now() - start < HANG_MS);
              }
              // Up to 4096 bytes until the peer has our SETTINGS and has sent the size update.
              const bound = acknowledged && block.length > 0 ? maxTableBytes : Math.max(maxTableBytes, 4096);
              assert.ok(decoder.dynamicTable().bytes <= bound);
            }
          },
        ),
        2000,
        () =>
          `; ${decoded} blocks decoded, ${tooLarge} HeaderListTooLargeError, HpackError: ` +
          [...malformed].map(([kind, n]) => `${n} ${kind}`).join('; '),
      );
    },
  );
});

/** An HPACK integer (RFC 7541 §5.1) with a `bits`-bit prefix under `high`, written here, not by our encoder. */
function hpackInt(value: number, bits: number, high: number): number[] {
  const max = (1 << bits) - 1;
  if (value < max) return [high | value];
  const out = [high | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}
