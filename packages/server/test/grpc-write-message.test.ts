import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { COALESCE_BYTES, writeMessage } from '../src/frontends/grpc/node-call-stream.js';

/** A stream stand-in that records writes, corks and the end. */
function recordingStream() {
  const writes: Uint8Array[] = [];
  const events: string[] = [];
  let corked = 0;
  return {
    writes,
    events,
    stream: {
      write(chunk: Uint8Array) {
        events.push(corked > 0 ? 'write(corked)' : 'write');
        writes.push(Uint8Array.from(chunk));
        return true;
      },
      cork() {
        corked++;
        events.push('cork');
      },
      end(chunk?: Uint8Array) {
        if (chunk !== undefined) writes.push(Uint8Array.from(chunk));
        events.push(chunk === undefined ? 'end' : 'end(chunk)');
        corked = 0;
        return this;
      },
    },
  };
}

function random(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed || 1;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

describe('writeMessage', () => {
  const prefix = Uint8Array.from([0, 1, 2, 3, 4]);
  const layouts: number[][] = [
    [],
    [0],
    [13, 41, 4000, 20],
    [COALESCE_BYTES],
    [COALESCE_BYTES - 5],
    [30, COALESCE_BYTES - 35, 1],
    [30, 602_112],
    [30, 4, 1_536_000, 40, 0, 2_000_000, 7],
    [70_000, 3],
  ];
  for (const [n, sizes] of layouts.entries()) {
    it(`writes prefix + chunks byte for byte (${sizes.join(', ') || 'empty'})`, () => {
      const chunks = sizes.map((s, i) => random(s, n * 31 + i));
      const length = sizes.reduce((a, b) => a + b, 0);
      const { stream, writes, events } = recordingStream();
      writeMessage(stream, prefix, chunks, length);
      assert.deepEqual(concat(writes), concat([prefix, ...chunks]));
      assert.equal(events.at(-1)?.startsWith('end'), true);
      if (length <= COALESCE_BYTES) {
        // A small message is one buffer handed over with the end of the stream.
        assert.deepEqual(events, ['end(chunk)']);
      } else {
        // A large one: every write while corked, the first holding the prefix and the small
        // chunks before the first large one; large chunks are passed as they are.
        assert.equal(events[0], 'cork');
        assert.ok(events.slice(1, -1).every((e) => e === 'write(corked)'));
        const firstLarge = sizes.findIndex((_, i) => {
          const before = 5 + sizes.slice(0, i).reduce((a, b) => a + b, 0);
          return sizes[i]! >= COALESCE_BYTES - before;
        });
        const headLength = 5 + sizes.slice(0, firstLarge).reduce((a, b) => a + b, 0);
        assert.equal(writes[0]!.byteLength, headLength);
      }
    });
  }
});
