/**
 * Structural limits of JSON bodies (src/json-limits.ts): the scan refuses a body at the first
 * value past a limit and takes one at the limit; the fast reader takes what the scan takes
 * and falls back (undefined) past a limit, so that the scan before the general path answers.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError, checkJsonLimits, readFastJsonBody, type JsonLimits } from '../src/index.js';

const OPEN: JsonLimits = { maxDepth: Infinity, maxObjectKeys: Infinity, maxValues: Infinity };

const refused = (pattern: RegExp) => (e: unknown) =>
  e instanceof ServingError && e.code === Code.INVALID_ARGUMENT && pattern.test(e.message);

/** Counts the scan gives `text`: the smallest limits it passes. */
function smallest(text: string): JsonLimits {
  const bytes = Buffer.from(text);
  const least = (key: keyof JsonLimits): number => {
    for (let n = 0; n < 100_000; n++) {
      try {
        checkJsonLimits(bytes, { ...OPEN, [key]: n });
        return n;
      } catch {
        // Try the next.
      }
    }
    throw new Error('no limit found');
  };
  return {
    maxDepth: least('maxDepth'),
    maxObjectKeys: least('maxObjectKeys'),
    maxValues: least('maxValues'),
  };
}

describe('JSON limits', () => {
  it('counts depth, keys of one object and values as a parser sees them (strings with brackets, escapes, spaces)', () => {
    assert.deepEqual(smallest('{"a":[1,2,[3]],"b":{"c":"x]}\\"{,"},"d":true}'), {
      maxDepth: 3,
      maxObjectKeys: 3,
      // The body, the list, 1, 2, the inner list, 3, the object, "x...", true.
      maxValues: 9,
    });
    assert.deepEqual(smallest(' [ -1.5e+3 , null , "a" ] '), { maxDepth: 1, maxObjectKeys: 0, maxValues: 4 });
    assert.deepEqual(smallest('{}'), { maxDepth: 1, maxObjectKeys: 0, maxValues: 1 });
  });

  it('refuses at the first value past a limit, with a message naming it', () => {
    const keys = Buffer.from(`{${Array.from({ length: 5000 }, (_, i) => `"k${i}":0`).join(',')}}`);
    assert.throws(
      () => {
        checkJsonLimits(keys, { ...OPEN, maxObjectKeys: 1000 });
      },
      refused(/object with more than 1000 keys \(limit 1000\)/),
    );
    const deep = Buffer.from('['.repeat(200_000));
    assert.throws(
      () => {
        checkJsonLimits(deep, { ...OPEN, maxDepth: 100 });
      },
      refused(/nested deeper than 100 levels/),
    );
    assert.throws(
      () => {
        checkJsonLimits(Buffer.from(`[${'0,'.repeat(99)}0]`), { ...OPEN, maxValues: 100 });
      },
      refused(/more than 100 values/),
    );
    checkJsonLimits(Buffer.from(`[${'0,'.repeat(98)}0]`), { ...OPEN, maxValues: 100 });
    // Malformed text ends the scan too (the reader after it gives the error).
    checkJsonLimits(Buffer.from('{"a": [1, 2'), { maxDepth: 5, maxObjectKeys: 5, maxValues: 5 });
    checkJsonLimits(Buffer.from(']]]}}}"'), { maxDepth: 1, maxObjectKeys: 1, maxValues: 1 });
  });

  it('the fast reader takes a body at the limits and falls back past them', () => {
    const tensor = `[${Array.from({ length: 4 }, (_, i) => `[${Array.from({ length: 40 }, (_, j) => i * 40 + j).join(',')}]`).join(',')}]`;
    const bodies: [string, 'tfs-predict' | 'kserve-infer' | 'sagemaker-json'][] = [
      [`{"signature_name":"s","instances":${tensor}}`, 'tfs-predict'],
      [`{"inputs":{"a":${tensor},"b":${tensor},"c":[1,2]}}`, 'tfs-predict'],
      [
        `{"id":"x","inputs":[{"name":"a","datatype":"FP32","shape":[4,40],"data":${tensor},"parameters":{"p":1}}]}`,
        'kserve-infer',
      ],
      [tensor, 'sagemaker-json'],
    ];
    for (const [text, format] of bodies) {
      const bytes = Buffer.from(text);
      const least = smallest(text);
      assert.notEqual(
        readFastJsonBody(format, bytes, undefined, least),
        undefined,
        `${format}: ${text.slice(0, 40)}`,
      );
      for (const key of ['maxDepth', 'maxObjectKeys', 'maxValues'] as const) {
        if (least[key] === 0) continue;
        const tighter = { ...least, [key]: least[key] - 1 };
        assert.equal(readFastJsonBody(format, bytes, undefined, tighter), undefined, `${format} ${key}`);
        assert.throws(() => {
          checkJsonLimits(bytes, tighter);
        }, refused(/JSON/));
      }
    }
  });
});
