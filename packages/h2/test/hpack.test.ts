/**
 * HPACK codec unit tests: the RFC 7541 Appendix C examples (header lists and dynamic table
 * states), the Huffman code, encodeHeaderBlock round trips, and hostile header blocks.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  createHpackDecoder,
  encodeHeaderBlock,
  HeaderListTooLargeError,
  HpackError,
  type HpackDecoder,
  decodeHuffman,
  encodeHuffman,
  huffmanEncodedLength,
} from '../src/index.js';

type Fields = (readonly [string, string])[];

/** A header block holding only a dynamic table size update to `size` (RFC 7541 §6.3). */
function sizeUpdate(size: number): Uint8Array {
  if (size < 31) return Uint8Array.of(0x20 | size);
  const out = [0x3f];
  let rest = size - 31;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest >>= 7;
  }
  out.push(rest);
  return Uint8Array.from(out);
}

function hex(text: string): Uint8Array {
  return Uint8Array.from(Buffer.from(text.replace(/\s+/g, ''), 'hex'));
}

function decodeAll(decoder: HpackDecoder, block: Uint8Array): Fields {
  const fields: Fields = [];
  decoder.decode(block, (name, value) => {
    fields.push([name, value]);
  });
  return fields;
}

/** One header block of an Appendix C sequence, the list it carries and the table after it. */
interface Step {
  readonly block: string;
  readonly fields: Fields;
  readonly table: Fields;
  readonly bytes: number;
}

/**
 * Decodes the steps on one decoder. With `maxTableBytes` (below 4096), the decoder first goes
 * through what an HTTP/2 connection does: our SETTINGS acknowledged, then the peer's size update.
 */
function runSequence(steps: readonly Step[], maxTableBytes?: number): void {
  const decoder = createHpackDecoder(maxTableBytes === undefined ? {} : { maxTableBytes });
  if (maxTableBytes !== undefined) {
    decoder.settingsAcknowledged();
    decoder.decode(sizeUpdate(maxTableBytes), () => undefined);
  }
  for (const step of steps) {
    assert.deepEqual(decodeAll(decoder, hex(step.block)), step.fields);
    const table = decoder.dynamicTable();
    assert.deepEqual(table.entries, step.table);
    assert.equal(table.bytes, step.bytes);
  }
}

// The header lists and tables of RFC 7541 C.3/C.4 (requests) and C.5/C.6 (responses).
const REQ1: Fields = [
  [':method', 'GET'],
  [':scheme', 'http'],
  [':path', '/'],
  [':authority', 'www.example.com'],
];
const REQ2: Fields = [...REQ1, ['cache-control', 'no-cache']];
const REQ3: Fields = [
  [':method', 'GET'],
  [':scheme', 'https'],
  [':path', '/index.html'],
  [':authority', 'www.example.com'],
  ['custom-key', 'custom-value'],
];
const AUTH = [':authority', 'www.example.com'] as const;
const NOCACHE = ['cache-control', 'no-cache'] as const;
const CUSTOM = ['custom-key', 'custom-value'] as const;
const REQ_TABLES: readonly [Fields, number][] = [
  [[AUTH], 57],
  [[NOCACHE, AUTH], 110],
  [[CUSTOM, NOCACHE, AUTH], 164],
];

const DATE1 = 'Mon, 21 Oct 2013 20:13:21 GMT';
const DATE2 = 'Mon, 21 Oct 2013 20:13:22 GMT';
const LOCATION = 'https://www.example.com';
const COOKIE = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
const RES1: Fields = [
  [':status', '302'],
  ['cache-control', 'private'],
  ['date', DATE1],
  ['location', LOCATION],
];
const RES2: Fields = [
  [':status', '307'],
  ['cache-control', 'private'],
  ['date', DATE1],
  ['location', LOCATION],
];
const RES3: Fields = [
  [':status', '200'],
  ['cache-control', 'private'],
  ['date', DATE2],
  ['location', LOCATION],
  ['content-encoding', 'gzip'],
  ['set-cookie', COOKIE],
];
const RES_TABLES: readonly [Fields, number][] = [
  [
    [
      ['location', LOCATION],
      ['date', DATE1],
      ['cache-control', 'private'],
      [':status', '302'],
    ],
    222,
  ],
  [
    [
      [':status', '307'],
      ['location', LOCATION],
      ['date', DATE1],
      ['cache-control', 'private'],
    ],
    222,
  ],
  [
    [
      ['set-cookie', COOKIE],
      ['content-encoding', 'gzip'],
      ['date', DATE2],
    ],
    215,
  ],
];

function steps(
  blocks: readonly string[],
  lists: readonly Fields[],
  tables: readonly [Fields, number][],
): Step[] {
  return blocks.map((block, i) => ({ block, fields: lists[i]!, table: tables[i]![0], bytes: tables[i]![1] }));
}

describe('HPACK decoder: RFC 7541 Appendix C', () => {
  it('C.2.1 literal with indexing adds to the table', () => {
    runSequence([
      {
        block: '400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572',
        fields: [['custom-key', 'custom-header']],
        table: [['custom-key', 'custom-header']],
        bytes: 55,
      },
    ]);
  });
  it('C.2.2 literal without indexing, C.2.3 never indexed, C.2.4 indexed leave the table empty', () => {
    runSequence([
      {
        block: '040c 2f73 616d 706c 652f 7061 7468',
        fields: [[':path', '/sample/path']],
        table: [],
        bytes: 0,
      },
    ]);
    runSequence([
      {
        block: '1008 7061 7373 776f 7264 0673 6563 7265 74',
        fields: [['password', 'secret']],
        table: [],
        bytes: 0,
      },
    ]);
    runSequence([{ block: '82', fields: [[':method', 'GET']], table: [], bytes: 0 }]);
  });
  it('C.3 requests without Huffman coding', () => {
    runSequence(
      steps(
        [
          '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
          '8286 84be 5808 6e6f 2d63 6163 6865',
          '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
        ],
        [REQ1, REQ2, REQ3],
        REQ_TABLES,
      ),
    );
  });
  it('C.4 requests with Huffman coding', () => {
    runSequence(
      steps(
        [
          '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
          '8286 84be 5886 a8eb 1064 9cbf',
          '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
        ],
        [REQ1, REQ2, REQ3],
        REQ_TABLES,
      ),
    );
  });
  it('C.5 responses without Huffman coding, 256-byte table with eviction', () => {
    runSequence(
      steps(
        [
          `4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
           2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
           6c65 2e63 6f6d`,
          '4803 3330 37c1 c0bf',
          `88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
           54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
           5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
           3d31`,
        ],
        [RES1, RES2, RES3],
        RES_TABLES,
      ),
      256,
    );
  });
  it('C.6 responses with Huffman coding, 256-byte table with eviction', () => {
    runSequence(
      steps(
        [
          `4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
           2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3`,
          '4883 640e ffc1 c0bf',
          `88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
           77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
           9587 3160 65c0 03ed 4ee5 b106 3d50 07`,
        ],
        [RES1, RES2, RES3],
        RES_TABLES,
      ),
      256,
    );
  });
});

describe('HPACK Huffman code', () => {
  it('round-trips every byte value and all two-byte sequences', () => {
    const all = Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join('');
    const texts = [all, '', 'a', 'www.example.com', 'no-cache', 'custom-key', '\u00ff\u0000\u00fe'];
    for (let a = 0; a < 256; a += 7) for (let b = 0; b < 256; b += 5) texts.push(String.fromCharCode(a, b));
    for (const text of texts) {
      const out = new Uint8Array(huffmanEncodedLength(text));
      assert.equal(encodeHuffman(text, out, 0), out.length);
      assert.equal(decodeHuffman(out, 0, out.length), text);
    }
  });
  it('encodes the RFC examples byte for byte', () => {
    const text = 'www.example.com';
    const out = new Uint8Array(huffmanEncodedLength(text));
    encodeHuffman(text, out, 0);
    assert.deepEqual(out, hex('f1e3 c2e5 f23a 6ba0 ab90 f4ff'));
  });
  it('decodes strings longer than its kept scratch buffer (64 KiB)', () => {
    for (const length of [40_000, 41_000, 120_000]) {
      const text = Array.from({ length }, (_, i) => String.fromCharCode((i * 7) % 256)).join('');
      const out = new Uint8Array(huffmanEncodedLength(text));
      encodeHuffman(text, out, 0);
      assert.equal(decodeHuffman(out, 0, out.length), text);
    }
  });
  it('rejects padding longer than 7 bits, padding with a zero bit, and EOS', () => {
    // 'a' is 00011 (5 bits): 0x1f pads with 111.
    assert.equal(decodeHuffman(hex('1f'), 0, 1), 'a');
    assert.throws(() => decodeHuffman(hex('1fff'), 0, 2), HpackError); // 11 bits of padding
    assert.throws(() => decodeHuffman(hex('ff'), 0, 1), HpackError); // 8 bits of padding alone
    assert.throws(() => decodeHuffman(hex('1e'), 0, 1), HpackError); // padding 110
    assert.throws(() => decodeHuffman(hex('18'), 0, 1), HpackError); // padding 000
    // EOS (30 ones) then padding to 32 bits.
    assert.throws(() => decodeHuffman(hex('ffff ffff'), 0, 4), HpackError);
    // 'a' then EOS then padding.
    assert.throws(() => decodeHuffman(hex('1fff ffff ff'), 0, 5), HpackError);
  });
});

describe('encodeHeaderBlock', () => {
  const LIST: Fields = [
    [':status', '200'],
    ['content-type', 'application/grpc'],
    ['grpc-encoding', 'identity'],
    ['grpc-accept-encoding', 'identity,gzip'],
    ['grpc-status', '0'],
    ['grpc-message', 'a%20b'],
    ['x-long', 'v'.repeat(300)],
    ['x-latin1', '\u00e9\u00ff\u0001\t'],
    ['x-empty', ''],
    [':authority', ''],
    ['accept-encoding', 'gzip, deflate'],
    ['www-authenticate', 'x'],
  ];
  it('round-trips through our decoder, on a fresh and on a used table alike', () => {
    const block = encodeHeaderBlock(LIST);
    const used = createHpackDecoder();
    decodeAll(used, hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572'));
    for (const decoder of [createHpackDecoder(), used]) {
      const before = decoder.dynamicTable();
      assert.deepEqual(decodeAll(decoder, block), LIST);
      assert.deepEqual(decoder.dynamicTable(), before);
    }
  });
  it('uses static entries: exact matches as one byte, static names by index', () => {
    const encode = (fields: Fields) => Buffer.from(encodeHeaderBlock(fields)).toString('hex');
    assert.equal(
      encode([
        [':status', '200'],
        [':method', 'POST'],
      ]),
      '8883',
    );
    // content-type is static index 31: 0000 1111 then 31 - 15 = 16.
    assert.equal(encode([['content-type', 'a']]), '0f100161');
    // :status 201 has static name 8.
    assert.equal(encode([[':status', '201']]), '0803323031');
    assert.equal(encode([['x', 'y']]), '0001780179');
    assert.equal(encode([]), '');
  });
  it('rejects names and values HTTP/2 peers would treat as malformed', () => {
    for (const name of ['Content-Type', '', ':', 'a b', 'x\u00e9', 'a:b', 'x\n']) {
      assert.throws(() => encodeHeaderBlock([[name, 'v']]), RangeError, name);
    }
    for (const value of ['a\r\nb', 'a\u0000', '\u20ac']) {
      assert.throws(() => encodeHeaderBlock([['x', value]]), RangeError, JSON.stringify(value));
    }
  });
});

/** Blocks that are valid on a fresh decoder, for the truncation tests. */
const VALID_BLOCKS: readonly Uint8Array[] = [
  hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'),
  hex('8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf'.replace('85bf ', '85')),
  hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572'),
  hex('1008 7061 7373 776f 7264 0673 6563 7265 74'),
  encodeHeaderBlock([
    ['content-type', 'application/grpc'],
    ['x-long', 'v'.repeat(300)],
    ['x-long-name-'.padEnd(200, 'n'), 'w'],
  ]),
  hex('3fe1 1f 82'), // size update to 4096, then :method GET
];

function expectHpackError(decoder: HpackDecoder, block: Uint8Array, what: string): void {
  assert.throws(
    () => {
      decoder.decode(block, () => undefined);
    },
    HpackError,
    what,
  );
}

describe('HPACK decoder: hostile header blocks', () => {
  it('decodes the valid blocks used below', () => {
    for (const block of VALID_BLOCKS) decodeAll(createHpackDecoder(), block);
  });
  it('rejects every truncation of a valid block that cuts a field', () => {
    for (const block of VALID_BLOCKS) {
      // Field boundaries: a cut there is a valid shorter block.
      const boundaries = new Set<number>();
      for (let cut = 0; cut <= block.length; cut++) {
        try {
          decodeAll(createHpackDecoder(), block.subarray(0, cut));
          boundaries.add(cut);
        } catch (error) {
          assert.ok(error instanceof HpackError, `cut at ${cut}: ${String(error)}`);
        }
      }
      assert.ok(boundaries.has(0) && boundaries.has(block.length));
      // A block of n fields has n + 1 valid cuts at most (the size update counts as a field here).
      const fields = decodeAll(createHpackDecoder(), block).length + 1;
      assert.ok(
        boundaries.size <= fields + 1,
        `block ${Buffer.from(block).toString('hex')}: ${[...boundaries].join(',')}`,
      );
    }
  });
  it('rejects integers past 2^31-1 and overlong zero continuations, accepts 2^31-1 where it fits', () => {
    // Indexed field, index 127 + 0x7fffff80 = 2^31-1: a valid integer but no such entry.
    expectHpackError(createHpackDecoder(), hex('ff 80ffffff07'), 'index 2^31-1');
    expectHpackError(createHpackDecoder(), hex('ff 81ffffff07'), 'index 2^31');
    expectHpackError(createHpackDecoder(), hex('ff ffffffff0f'), 'index 2^35');
    expectHpackError(createHpackDecoder(), hex('ff 8080808080808000'), 'zero continuations');
    expectHpackError(createHpackDecoder(), hex('ff ff'), 'truncated integer');
    // A string length of 2^31 - 1.
    expectHpackError(createHpackDecoder(), hex('00 7f 80ffffff07'), 'huge string length');
  });
  it('rejects index 0 and indices beyond the static and dynamic tables', () => {
    expectHpackError(createHpackDecoder(), hex('80'), 'indexed 0');
    expectHpackError(createHpackDecoder(), hex('be'), 'indexed 62 with an empty table');
    expectHpackError(createHpackDecoder(), hex('7e 0161'), 'name index 62 with an empty table');
    expectHpackError(createHpackDecoder(), hex('0f2f 0161'), 'name index 62 without indexing');
    const decoder = createHpackDecoder();
    decodeAll(decoder, hex('4001 61 0162')); // one entry: a: b
    assert.deepEqual(decodeAll(decoder, hex('be')), [['a', 'b']]);
    expectHpackError(decoder, hex('bf'), 'indexed 63 with one entry');
  });
  it('rejects a size update above the advertised limit or after the first field', () => {
    expectHpackError(createHpackDecoder(), hex('3fe2 1f'), 'size update to 4097');
    const acknowledged = (maxTableBytes: number) => {
      const decoder = createHpackDecoder({ maxTableBytes });
      decoder.settingsAcknowledged();
      return decoder;
    };
    expectHpackError(acknowledged(100), hex('3f46'), 'size update to 101');
    assert.deepEqual(decodeAll(acknowledged(100), hex('3f45 82')), [[':method', 'GET']]);
    assert.deepEqual(decodeAll(createHpackDecoder({ maxTableBytes: 8192 }), sizeUpdate(8192)), []);
    expectHpackError(createHpackDecoder({ maxTableBytes: 8192 }), sizeUpdate(8193), 'size update to 8193');
    expectHpackError(createHpackDecoder(), hex('82 20'), 'size update after a field');
    // Several updates at the start are allowed; the last one applies (RFC 7541 §4.2).
    const decoder = createHpackDecoder();
    decodeAll(decoder, hex('4001 61 0162'));
    assert.deepEqual(decodeAll(decoder, hex('20 3fe1 1f')), []);
    // ...the first (size 0) emptied the table, so index 62 no longer exists.
    expectHpackError(decoder, hex('be'), 'entry evicted by size 0');
  });
  it('rejects bad Huffman in names and values', () => {
    expectHpackError(createHpackDecoder(), hex('00 81ff 0161'), 'name of 8 padding bits');
    expectHpackError(createHpackDecoder(), hex('00 0161 851fffffffff'), 'value with EOS');
    expectHpackError(createHpackDecoder(), hex('00 0161 811e'), 'value padding with a zero');
  });
  it('a limit below 4096 holds only from the size update after our SETTINGS are acknowledged', () => {
    const decoder = createHpackDecoder({ maxTableBytes: 256 });
    // Before the peer has our SETTINGS it may fill 4096 bytes and size-update up to 4096.
    const big = encodeHeaderBlock([['x-big', 'b'.repeat(3000)]]);
    big[0] = 0x40;
    decodeAll(decoder, big);
    decodeAll(decoder, hex('4001 61 0162'));
    assert.equal(decoder.dynamicTable().bytes, 3037 + 34);
    assert.deepEqual(decodeAll(decoder, hex('3fe1 1f bf')), [['x-big', 'b'.repeat(3000)]]);
    decoder.settingsAcknowledged();
    // Now the next block must start with a size update to at most 256.
    const withoutUpdate = createHpackDecoder({ maxTableBytes: 256 });
    withoutUpdate.settingsAcknowledged();
    expectHpackError(withoutUpdate, hex('82'), 'no size update after SETTINGS lowered the limit');
    const tooBig = createHpackDecoder({ maxTableBytes: 256 });
    tooBig.settingsAcknowledged();
    expectHpackError(tooBig, sizeUpdate(257), 'size update above 256 after the acknowledgement');
    assert.deepEqual(decodeAll(decoder, Buffer.concat([sizeUpdate(256), sizeUpdate(200), hex('be')])), [
      ['a', 'b'],
    ]);
    assert.deepEqual(decoder.dynamicTable(), { entries: [['a', 'b']], bytes: 34 });
    // The update was made: later blocks need none.
    assert.deepEqual(decodeAll(decoder, hex('be')), [['a', 'b']]);
    // At 4096 and above the acknowledgement changes nothing.
    const plain = createHpackDecoder();
    decodeAll(plain, hex('4001 61 0162'));
    plain.settingsAcknowledged();
    assert.deepEqual(decodeAll(plain, hex('be')), [['a', 'b']]);
  });
  it('an entry larger than the table empties it; a size update evicts', () => {
    const decoder = createHpackDecoder({ maxTableBytes: 64 });
    decoder.settingsAcknowledged();
    decodeAll(decoder, sizeUpdate(64));
    decodeAll(decoder, hex('4001 61 0162'));
    assert.equal(decoder.dynamicTable().bytes, 34);
    const big = encodeHeaderBlock([['x', 'y'.repeat(40)]]);
    big[0] = 0x40; // with incremental indexing
    decodeAll(decoder, big);
    assert.deepEqual(decoder.dynamicTable(), { entries: [], bytes: 0 });
  });
  it('a header-list bomb ends in HeaderListTooLargeError quickly, and the table stays in step', () => {
    const decoder = createHpackDecoder({ maxHeaderListBytes: 65536 });
    // One 4000-byte entry, then 16,000 one-byte references to it: a 64 MB header list.
    const entry = encodeHeaderBlock([['x-bomb', 'b'.repeat(4000)]]);
    entry[0] = 0x40;
    const block = Buffer.concat([entry, Buffer.alloc(16_000, 0xbe), Buffer.from(hex('4001 61 0162'))]);
    let seen = 0;
    const start = performance.now();
    assert.throws(() => {
      decoder.decode(block, () => {
        seen++;
      });
    }, HeaderListTooLargeError);
    assert.ok(performance.now() - start < 1000);
    assert.ok(seen <= 17, `${seen} fields handed out`);
    // The literal after the bomb was still added: the table matches the peer's.
    assert.deepEqual(decodeAll(decoder, hex('be bf')), [
      ['a', 'b'],
      ['x-bomb', 'b'.repeat(4000)],
    ]);
  });
  it('a list exactly at the limit passes, one byte over fails', () => {
    const fields: Fields = [['x', 'y'.repeat(100)]];
    const size = 1 + 100 + 32;
    assert.deepEqual(
      decodeAll(createHpackDecoder({ maxHeaderListBytes: size }), encodeHeaderBlock(fields)),
      fields,
    );
    assert.throws(
      () => decodeAll(createHpackDecoder({ maxHeaderListBytes: size - 1 }), encodeHeaderBlock(fields)),
      HeaderListTooLargeError,
    );
  });
  it('latin1 bytes decode one code unit per byte', () => {
    assert.deepEqual(decodeAll(createHpackDecoder(), hex('00 0161 03 80 9f ff')), [
      ['a', '\u0080\u009f\u00ff'],
    ]);
    const long = Buffer.alloc(40, 0xe9);
    assert.deepEqual(decodeAll(createHpackDecoder(), Buffer.concat([hex('00 0161 28'), long])), [
      ['a', '\u00e9'.repeat(40)],
    ]);
  });
  it('the dynamic table grows past its first slots and wraps around', () => {
    const decoder = createHpackDecoder({ maxTableBytes: 65536 });
    const expected: Fields = [];
    for (let i = 0; i < 1500; i++) {
      const field = [`k${i % 7}`, `v${i}`] as const;
      const block = encodeHeaderBlock([field]);
      block[0] = 0x40;
      decodeAll(decoder, block);
      expected.unshift(field);
    }
    // Entries are 32 + 2 + 2..5 bytes: the last ~1700 fit; all 1500 stay.
    const table = decoder.dynamicTable();
    assert.deepEqual(table.entries, expected);
    assert.deepEqual(decodeAll(decoder, hex('be')), [expected[0]]);
    // Shrinking evicts the oldest.
    decodeAll(decoder, hex('3f e1 1f'));
    const after = decoder.dynamicTable();
    assert.ok(after.bytes <= 4096);
    assert.deepEqual(after.entries, expected.slice(0, after.entries.length));
  });
});
