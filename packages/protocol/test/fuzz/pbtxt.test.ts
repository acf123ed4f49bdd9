/**
 * Fuzz target: the protobuf text format parser: strings with every escape read back; any text
 * (hostile edits of model config lists, deep nesting, random bytes) parses or fails with
 * INVALID_ARGUMENT only. Its readers are fuzzed where they live (label maps in
 * packages/vision/test/fuzz, config files in packages/server/test/fuzz).
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parsePbtxt } from '@visionserve/protocol/pbtxt';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';
import { configTextArb, hostileTextArb, literal, styleArb } from '@visionserve/testkit/pbtxt-text';

describe('fuzz: protobuf text format', () => {
  it(
    'pbtxt/generic: strings with every escape read back; any text parses or fails with INVALID_ARGUMENT',
    targetOptions('pbtxt/generic'),
    (t) => {
      fuzzSync(
        t,
        'pbtxt/generic',
        fc.property(
          fc.oneof(
            fc
              .tuple(fc.string({ unit: 'grapheme', maxLength: 20 }), styleArb)
              .map(([value, style]) => ({ value, text: `s: ${literal(value, style)}` })),
            hostileTextArb(configTextArb).map((text) => ({ value: undefined, text })),
            fc.string({ unit: 'binary', maxLength: 80 }).map((text) => ({ value: undefined, text })),
          ),
          ({ value, text }) => {
            const parsed = outcome(() => parsePbtxt(text));
            if (value === undefined) return;
            const field = parsed.ok ? parsed.value.fields[0] : undefined;
            if (field?.value.kind !== 'string' || field.value.value !== value) {
              throw new Error(
                `${JSON.stringify(value)} written as ${text} read back as ${JSON.stringify(field?.value)}`,
              );
            }
          },
        ),
        500,
      );
    },
  );
});
