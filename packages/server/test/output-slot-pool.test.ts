import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createOutputSlotPool } from '../src/runtime/output-slot-pool.js';

const MB = 1024 * 1024;

void describe('output slot pool (an inference worker lending large outputs)', () => {
  void it('never hands out a busy slot; a freed one is reused, the smallest that fits first', () => {
    const pool = createOutputSlotPool({ maxBytes: 64 * MB, idleMs: 1000 });
    const a = pool.take(4 * MB)!;
    const b = pool.take(4 * MB)!;
    assert.notEqual(a, b);
    assert.notEqual(pool.buffer(a), pool.buffer(b));
    assert.equal(pool.buffer(a).byteLength, 4 * MB);
    const big = pool.take(8 * MB)!;
    assert.equal(pool.keptBytes, 16 * MB);
    pool.free(big);
    pool.free(a);
    // 3 MB fits both free slots: the 4 MB one is taken, the 8 MB one kept for bigger outputs.
    assert.equal(pool.take(3 * MB), a);
    assert.equal(pool.take(5 * MB), big);
    assert.equal(pool.keptBytes, 16 * MB, 'no new memory for reused slots');
  });

  void it('keeps at most maxBytes: past it, take answers undefined until a slot is freed', () => {
    const pool = createOutputSlotPool({ maxBytes: 10 * MB, idleMs: 1000 });
    const a = pool.take(4 * MB)!;
    const b = pool.take(4 * MB)!;
    assert.equal(pool.take(4 * MB), undefined, 'over the cap');
    assert.equal(pool.take(11 * MB), undefined, 'over the cap on its own');
    assert.equal(pool.take(0), undefined);
    assert.equal(pool.take(Number.NaN), undefined);
    pool.free(b);
    assert.equal(pool.take(2 * MB), b);
    pool.free(a);
    pool.free(a); // twice: still one free slot
    assert.equal(pool.take(4 * MB), a);
    assert.equal(pool.take(3 * MB), undefined, '8 MB busy: 3 more would pass the cap');
  });

  void it('trim drops only slots free for idleMs; indices the server holds never move', () => {
    let t = 0;
    const pool = createOutputSlotPool({ maxBytes: 64 * MB, idleMs: 30_000, now: () => t });
    const a = pool.take(2 * MB)!;
    const b = pool.take(2 * MB)!;
    const c = pool.take(2 * MB)!;
    const cMemory = pool.buffer(c);
    pool.free(a);
    t = 10_000;
    pool.free(b);
    t = 30_000;
    pool.trim(); // a: free for 30 s, dropped; b: 20 s, kept; c: busy, kept
    assert.equal(pool.keptBytes, 4 * MB);
    assert.throws(() => pool.buffer(a), /does not exist/);
    pool.free(a); // a late release of a dropped slot is ignored
    assert.equal(pool.buffer(c), cMemory);
    t = 45_000;
    pool.trim(); // b dropped now; c still busy
    assert.equal(pool.keptBytes, 2 * MB);
    assert.equal(pool.buffer(c), cMemory);
    // New slots take dropped indices; c keeps its own.
    const d = pool.take(1 * MB)!;
    const e = pool.take(1 * MB)!;
    assert.deepEqual([d, e].sort(), [a, b].sort());
    assert.equal(pool.take(1 * MB), 3);
    assert.equal(pool.buffer(c), cMemory);
    t = 1e9;
    pool.trim(); // everything is busy: nothing dropped
    assert.equal(pool.keptBytes, 5 * MB);
  });
});
