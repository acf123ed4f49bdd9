import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { assemble, contentTypeFor, miniBatches, splitRecords } from '../src/transform/transform-records.js';

const text = (b: Uint8Array): string => Buffer.from(b).toString();

describe('transform records', () => {
  it('splits lines (LF and CRLF), skipping blank ones, and keeps 1-based line numbers', () => {
    const records = splitRecords(Buffer.from('a\r\n\n  \nb\nc'), 'Line');
    assert.deepEqual(
      records.map((r) => [text(r.data), r.line]),
      [
        ['a', 1],
        ['b', 4],
        ['c', 5],
      ],
    );
    assert.equal(splitRecords(Buffer.from('x\ny'), 'None').length, 1);
    assert.deepEqual(splitRecords(Buffer.alloc(0), 'Line'), []);
  });

  it('MultiRecord fills requests up to the payload limit; SingleRecord sends one each; resumes from a record', () => {
    const records = splitRecords(Buffer.from('aaaa\nbbbb\ncccc\ndddd\n'), 'Line');
    assert.deepEqual(
      miniBatches(records, 'MultiRecord', 9).map((b) => [b.first, text(b.body)]),
      [
        [0, 'aaaa\nbbbb'],
        [2, 'cccc\ndddd'],
      ],
    );
    assert.equal(miniBatches(records, 'SingleRecord', 100).length, 4);
    assert.deepEqual(
      miniBatches(records, 'MultiRecord', 100, 3).map((b) => [b.index, b.first, text(b.body)]),
      [[0, 3, 'dddd']],
    );
    // A record over the limit still gets its own request (the server then refuses it).
    assert.equal(miniBatches(records, 'MultiRecord', 2).length, 4);
  });

  it('assembles with Line (exactly one trailing newline) or None (as is); guesses types by extension', () => {
    assert.equal(text(assemble(Buffer.from('{"a":1}\n\n'), 'Line')), '{"a":1}\n');
    assert.equal(text(assemble(Buffer.from('x'), 'Line')), 'x\n');
    assert.equal(text(assemble(Buffer.from('x\n'), 'None')), 'x\n');
    assert.equal(contentTypeFor('a/b.JSONL'), 'application/jsonlines');
    assert.equal(contentTypeFor('cat.jpeg'), 'image/jpeg');
    assert.equal(contentTypeFor('noext'), undefined);
  });
});
