/**
 * Fuzz targets: the TFRecord framing with its CRC-32C checks and the warmup file reader
 * (PredictionLog records) a version's load replays.
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Code } from '@visionserve/protocol';
import { crc32c } from '../../src/warmup/crc32c.js';
import { readTfRecords, writeTfRecords } from '../../src/warmup/tfrecord.js';
import { encodeWarmupFile, parseWarmupFile } from '../../src/warmup/warmup-file.js';
import { aliasArb, mutate, mutatedBytesArb, mutationArb, tensorArb } from '@visionserve/testkit/arbitraries';
import { tensorFromProto } from '@visionserve/protocol/tfs-proto';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';

/** Bitwise CRC-32C, the reference the table-driven one must equal. */
function crc32cBitwise(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) {
    crc ^= b;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

const recordsArb = fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 5 });

const warmupArb = fc
  .array(
    fc.record({
      inputs: fc.dictionary(aliasArb, tensorArb({ maxElements: 12 }), { minKeys: 1, maxKeys: 2 }),
      outputFilter: fc.array(aliasArb, { maxLength: 2 }),
      modelName: fc.string({ maxLength: 6 }),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((records) => encodeWarmupFile(records));

describe('fuzz: TFRecord and warmup files', () => {
  it(
    'tfrecord/crc32c: the table-driven CRC-32C equals the bitwise definition',
    targetOptions('tfrecord/crc32c'),
    (t) => {
      fuzzSync(
        t,
        'tfrecord/crc32c',
        fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
          if (crc32c(bytes) !== crc32cBitwise(bytes)) throw new Error('crc differs');
        }),
        500,
      );
    },
  );

  it(
    'tfrecord/round-trip: writeTfRecords -> readTfRecords is the identity',
    targetOptions('tfrecord/round-trip'),
    (t) => {
      fuzzSync(
        t,
        'tfrecord/round-trip',
        fc.property(recordsArb, (records) => {
          const back = readTfRecords(writeTfRecords(records));
          if (back.length !== records.length) throw new Error(`${back.length} records`);
          back.forEach((r, i) => {
            if (Buffer.compare(Buffer.from(r), Buffer.from(records[i]!)) !== 0)
              throw new Error(`record ${i} differs`);
          });
        }),
        300,
      );
    },
  );

  it(
    'tfrecord/hostile: corrupted framing is DATA_LOSS (or INVALID_ARGUMENT past the record limit), never anything else',
    targetOptions('tfrecord/hostile'),
    (t) => {
      fuzzSync(
        t,
        'tfrecord/hostile',
        fc.property(
          mutatedBytesArb(recordsArb.map(writeTfRecords)),
          fc.integer({ min: 0, max: 4 }),
          (bytes, max) => {
            const result = outcome(
              () => readTfRecords(bytes, { maxRecords: max }),
              [Code.DATA_LOSS, Code.INVALID_ARGUMENT],
            );
            if (result.ok) {
              let total = 0;
              for (const r of result.value) total += 16 + r.byteLength;
              if (total !== bytes.byteLength) throw new Error('records do not cover the file');
            }
          },
        ),
        600,
      );
    },
  );

  it(
    'warmup/hostile: mutated warmup files give their PredictRequests or DATA_LOSS / INVALID_ARGUMENT',
    targetOptions('warmup/hostile'),
    (t) => {
      fuzzSync(
        t,
        'warmup/hostile',
        fc.property(
          fc.oneof(
            mutatedBytesArb(warmupArb),
            // Records edited inside valid framing, so the PredictionLog decoding is what is hit.
            fc
              .tuple(warmupArb, fc.array(mutationArb, { minLength: 1, maxLength: 3 }))
              .map(([file, edits]) => writeTfRecords(readTfRecords(file).map((r) => mutate(r, edits)))),
          ),
          (bytes) => {
            const requests = outcome(() => parseWarmupFile(bytes), [Code.DATA_LOSS, Code.INVALID_ARGUMENT]);
            if (!requests.ok) return;
            for (const request of requests.value) {
              for (const [alias, proto] of Object.entries(request.inputs))
                outcome(() => tensorFromProto(proto, alias));
            }
          },
        ),
        400,
      );
    },
  );
});
