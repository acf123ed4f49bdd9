import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRecycledBuffers } from '../src/util/recycled-buffers.js';

describe('recycled buffers', () => {
  it('hands a kept buffer of about the asked size back, the smallest that fits', () => {
    const pool = createRecycledBuffers({ minBytes: 1024 });
    const small = new ArrayBuffer(4096);
    const larger = new ArrayBuffer(4500);
    pool.give([larger, small]);
    assert.equal(pool.keptBytes, 8596);
    assert.equal(pool.take(4000), small, 'the smallest buffer that holds 4000 bytes');
    assert.equal(pool.take(4000), larger);
    const fresh = pool.take(4000);
    assert.ok(fresh !== small && fresh !== larger && fresh.byteLength === 4000, 'then a new one');
    assert.equal(pool.keptBytes, 0);
  });

  it('keeps no buffer below minBytes, none much larger than asked, none detached', () => {
    const pool = createRecycledBuffers({ minBytes: 1024 });
    const tiny = new ArrayBuffer(512);
    const huge = new ArrayBuffer(100_000);
    const detached = new ArrayBuffer(4096);
    structuredClone(detached, { transfer: [detached] });
    pool.give([tiny, huge, detached]);
    assert.equal(pool.keptBytes, 100_000, 'only the large live buffer is kept');
    assert.notEqual(pool.take(2048), huge, 'a buffer over an eighth larger than asked is not used');
    assert.equal(pool.take(90_000), huge);
    assert.notEqual(pool.take(512), tiny);
  });

  it('drops the oldest buffers past maxBytes and the idle ones', async () => {
    const pool = createRecycledBuffers({ minBytes: 1024, maxBytes: 10_000, idleMs: 30 });
    const a = new ArrayBuffer(4000);
    const b = new ArrayBuffer(4000);
    const c = new ArrayBuffer(4000);
    pool.give([a, b, c]);
    assert.equal(pool.keptBytes, 8000, 'a went to make room for c');
    assert.equal(pool.take(4000), b);
    pool.give([b]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(pool.keptBytes, 0, 'idle buffers are dropped even with no further calls');
  });
});
