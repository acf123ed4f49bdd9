import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError } from '../src/errors.js';
import { type PbMessage, type PbValue, parsePbtxt } from '../src/pbtxt/pbtxt.js';
import { readMessage } from '../src/pbtxt/pbtxt-reader.js';

/** Plain-object view of a tree for compact assertions. */
function plain(v: PbValue): unknown {
  switch (v.kind) {
    case 'message':
      return v.fields.map((f) => [f.name, plain(f.value)]);
    case 'number':
      return v.value;
    case 'string':
      return v.value;
    case 'identifier':
      return { id: v.value };
  }
}

function rejects(text: string, pattern: RegExp): void {
  assert.throws(
    () => parsePbtxt(text, { source: 'x.pbtxt' }),
    (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT && pattern.test(e.message),
  );
}

void describe('parsePbtxt', () => {
  void it('parses nested messages, scalars, comments and separators', () => {
    const doc = parsePbtxt(`
      # a comment
      outer {
        name: 'a'  # trailing comment
        n: 42, f: -1.5e2; ok: true
        inner: { e: ENUM_VALUE }
        angle < x: 1 >
      }
    `);
    assert.deepEqual(plain(doc), [
      [
        'outer',
        [
          ['name', 'a'],
          ['n', 42],
          ['f', -150],
          ['ok', { id: 'true' }],
          ['inner', [['e', { id: 'ENUM_VALUE' }]]],
          ['angle', [['x', 1]]],
        ],
      ],
    ]);
  });

  void it('keeps repeated fields and list syntax in order', () => {
    const doc = parsePbtxt(
      'allowed_batch_sizes: 32 allowed_batch_sizes: 64 v: [1, 2] m: [{a: 1}, {a: 2}] e: []',
    );
    assert.deepEqual(plain(doc), [
      ['allowed_batch_sizes', 32],
      ['allowed_batch_sizes', 64],
      ['v', 1],
      ['v', 2],
      ['m', [['a', 1]]],
      ['m', [['a', 2]]],
    ]);
  });

  void it('parses TF Serving batching parameters', () => {
    const doc = parsePbtxt(`max_batch_size { value: 128 }
batch_timeout_micros { value: 0 }
thread_pool_name { value: "model_server_batch_threads" }
allowed_batch_sizes: 32
allowed_batch_sizes: 128
pad_variable_length_inputs: true`);
    const r = readMessage(doc);
    assert.equal(r.messageField('max_batch_size')?.int('value'), 128);
    assert.equal(r.messageField('thread_pool_name')?.string('value'), 'model_server_batch_threads');
    assert.deepEqual(
      r.all('allowed_batch_sizes').map((f) => plain(f.value)),
      [32, 128],
    );
    assert.equal(r.bool('pad_variable_length_inputs'), true);
  });

  void it('decodes string escapes and concatenates adjacent strings', () => {
    const doc = parsePbtxt(String.raw`a: "tab\there \"q\" \\ \x41\101\u00e9" b: 'it\'s' "more" c: "日本"`);
    assert.deepEqual(plain(doc), [
      ['a', 'tab\there "q" \\ AAé'],
      ['b', "it'smore"],
      ['c', '日本'],
    ]);
  });

  void it('parses number forms', () => {
    const doc = parsePbtxt('a: 0x1F b: -7 c: 1.5f d: .25 e: -inf f: nan g: 1e3 h: 010 i: 9007199254740993');
    const [a, b, c, d, e, f, g, h, i] = doc.fields.map((x) => x.value);
    assert.deepEqual(
      [a, b, c, d, e, g, h].map((v) => v && plain(v)),
      [31, -7, 1.5, 0.25, -Infinity, 1000, 8],
    );
    assert.ok(f?.kind === 'number' && Number.isNaN(f.value));
    assert.ok(g?.kind === 'number' && !g.integer);
    assert.ok(i?.kind === 'number' && i.text === '9007199254740993' && i.integer);
  });

  void it('accepts extension / Any names in brackets', () => {
    const doc = parsePbtxt('[type.googleapis.com/pkg.Msg] { x: 1 }');
    assert.equal(doc.fields[0]?.name, '[type.googleapis.com/pkg.Msg]');
  });

  void it('accepts an empty document', () => {
    assert.deepEqual(parsePbtxt('  # nothing\n').fields, []);
  });

  void it('reports malformed input with line and column', () => {
    rejects('a {\n  b: 1\n', /^x\.pbtxt:3:1: expected "}" before end of input/);
    rejects('a: 1\nb 2', /^x\.pbtxt:2:3: expected ":" or "\{" after field "b"/);
    rejects('a: "abc\n"', /^x\.pbtxt:1:4: unterminated string/);
    rejects('a: }', /^x\.pbtxt:1:4: expected a value, found "}"/);
    rejects('a {\n}\n}', /^x\.pbtxt:3:1: unexpected "}"/);
    rejects('a: 1\n  $', /^x\.pbtxt:2:3: unexpected character "\$"/);
    rejects('a: "\\q"', /^x\.pbtxt:1:5: invalid escape/);
    rejects('a: 12abc', /^x\.pbtxt:1:4: invalid number/);
    rejects('a: 09', /^x\.pbtxt:1:4: invalid octal number/);
    rejects('a: [1 2]', /^x\.pbtxt:1:7: expected "," or "\]" in list/);
    rejects('a: -foo', /^x\.pbtxt:1:5: expected a value/);
  });

  void it('refuses nesting deeper than 100 messages with INVALID_ARGUMENT, not a stack overflow', () => {
    const nested = (depth: number, open: string, close: string): string =>
      `${'a '.concat(open).repeat(depth)}${close.repeat(depth)}`;
    assert.equal(parsePbtxt(nested(100, '{', '}')).fields.length, 1);
    rejects(nested(101, '{', '}'), /^x\.pbtxt:1:303: messages nested deeper than 100 levels/);
    rejects(nested(100_000, '<', '>'), /nested deeper than 100 levels/);
    rejects(`${'a: [{'.repeat(50_000)}${'}]'.repeat(50_000)}`, /nested deeper than 100 levels/);
  });
});

void describe('readMessage', () => {
  const doc: PbMessage = parsePbtxt('s: "x"\nn: 3\nn: 4\nm { k: 1 }\nbig: 9007199254740993\nf: 2.5\nb: 1', {
    source: 'f',
  });
  const r = readMessage(doc, 'f');

  void it('reads typed fields', () => {
    assert.equal(r.string('s'), 'x');
    assert.equal(r.messageField('m')?.int('k'), 1);
    assert.equal(r.float('f'), 2.5);
    assert.equal(r.bool('b'), true);
    assert.equal(r.string('absent'), undefined);
  });

  void it('positions type errors', () => {
    assert.throws(() => r.int('s'), /f:1:4: field "s" expects an integer/);
    assert.throws(() => r.int('f'), /f:6:4: field "f" expects an integer/);
    assert.throws(() => r.int('big'), /f:5:6: field "big": 9007199254740993 is too large/);
    assert.throws(() => r.one('n'), /f:3:1: field "n" given more than once/);
    assert.throws(() => r.string('m'), /f:4:3: field "m" expects a string/);
    assert.throws(() => r.messageField('s'), /expects a message/);
    assert.throws(() => {
      r.checkKnown(['s', 'n'], 'Test');
    }, /f:4:1: unknown field "m" in Test/);
  });
});
