import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSharedBodyPool } from '../src/runtime/shared-body-pool.js';

void describe('shared body pool', () => {
  void it('lends exactly sized views of reused shared memory, each slot to one body at a time', () => {
    const pool = createSharedBodyPool({ maxBytes: 1 << 20, minSlotBytes: 1024 });
    const a = pool.acquire(3000)!;
    assert.equal(a.bytes.byteLength, 3000);
    assert.ok(a.bytes.buffer instanceof SharedArrayBuffer);
    assert.equal(a.bytes.buffer.byteLength, 4096);
    const b = pool.acquire(3000)!;
    assert.notEqual(b.bytes.buffer, a.bytes.buffer);
    assert.equal(pool.lent, 2);
    a.release();
    a.release(); // idempotent
    assert.equal(pool.lent, 1);
    const c = pool.acquire(2500)!;
    assert.equal(c.bytes.buffer, a.bytes.buffer);
    assert.equal(pool.keptBytes, 8192);
    // A bigger slot than the body: the rest of the buffer is the borrower's.
    const d = pool.acquire(100, 5000)!;
    assert.equal(d.bytes.byteLength, 100);
    assert.equal(d.bytes.buffer.byteLength, 8192);
    for (const x of [b, c, d]) x.release();
    assert.equal(pool.lent, 0);
  });

  void it('keeps at most maxBytes: free slots make room, lent ones never do', () => {
    const pool = createSharedBodyPool({ maxBytes: 16384, minSlotBytes: 1024 });
    const big = pool.acquire(8192)!;
    const other = pool.acquire(8192)!;
    assert.equal(pool.acquire(1024), undefined); // all of it lent
    other.release();
    const small = pool.acquire(1024)!; // the free 8 KiB slot is dropped for it
    assert.ok(small !== undefined);
    assert.ok(pool.keptBytes <= 16384);
    assert.equal(pool.acquire(1 << 20), undefined); // over the cap on its own
    assert.equal(pool.acquire(-1), undefined);
    assert.equal(pool.acquire(Number.NaN), undefined);
    big.release();
    small.release();
    assert.equal(pool.lent, 0);
  });

  void it('keeps its free slots when a body cannot get a slot anyway', () => {
    const pool = createSharedBodyPool({ maxBytes: 65536, minSlotBytes: 1024 });
    const big = pool.acquire(32768)!;
    const smalls = Array.from({ length: 8 }, () => pool.acquire(4096)!);
    for (const x of smalls) x.release();
    assert.equal(pool.keptBytes, 65536);
    // 32 KiB lent + 64 KiB asked > 64 KiB: refused, and the 8 free slots are still there.
    assert.equal(pool.acquire(40000), undefined);
    assert.equal(pool.keptBytes, 65536);
    const again = pool.acquire(4096)!;
    assert.equal(pool.keptBytes, 65536); // a kept slot, no new memory
    again.release();
    big.release();
  });

  it('drops its free slots once nothing has been lent for idleTrimMs', async () => {
    const pool = createSharedBodyPool({ minSlotBytes: 4096, idleTrimMs: 30 });
    const a = pool.acquire(5000)!;
    const b = pool.acquire(100)!;
    a.release();
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(pool.keptBytes, 8192 + 4096, 'a slot still lent: nothing dropped');
    b.release();
    await new Promise((r) => setTimeout(r, 20));
    const c = pool.acquire(100)!; // lent again before the trim: that trim is off
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(pool.keptBytes, 8192 + 4096, 'no trim while a slot is lent');
    assert.equal(pool.acquire(1 << 30), undefined); // a refused acquire lends nothing
    c.release();
    await new Promise((r) => setTimeout(r, 15));
    assert.equal(pool.keptBytes, 8192 + 4096, 'the release starts a new 30 ms wait');
    await new Promise((r) => setTimeout(r, 45));
    assert.equal(pool.keptBytes, 0);
    const d = pool.acquire(5000)!; // the pool still lends after a trim
    assert.equal(pool.keptBytes, 8192);
    d.release();
  });
});
