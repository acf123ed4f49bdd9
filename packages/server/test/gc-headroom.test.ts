/**
 * The heap growing factor asked of V8 after a full collection (util/gc-headroom.ts): enough for
 * the configured headroom above a small heap, capped, and V8's own policy (0) for heaps at
 * least as large as the headroom. Its effect on a serving process (full collections every
 * 10-20 requests without it, about none in steady state with it) is measured with --trace-gc
 * under load, not here: V8's collection schedule is not a unit-testable contract.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { growingPercentFor, keepGcHeadroom } from '../src/util/gc-headroom.js';

const MB = 1024 * 1024;

describe('gc headroom', () => {
  it('asks for the headroom above a small heap, capped at 2000 %', () => {
    assert.equal(growingPercentFor(32 * MB, 64 * MB), 200);
    assert.equal(growingPercentFor(11 * MB, 64 * MB), 582);
    assert.equal(growingPercentFor(48 * MB, 64 * MB), 134);
    assert.equal(growingPercentFor(1 * MB, 64 * MB), 2000);
  });

  it('gives a 9 MiB heap (the bundled server after start-up) the whole headroom', () => {
    const used = 9 * MB;
    const room = (used * growingPercentFor(used, 64 * MB)) / 100;
    assert.ok(room >= 64 * MB, `room ${room / MB} MiB`);
  });

  it("leaves V8's own policy for heaps at least as large as the headroom, and when off", () => {
    assert.equal(growingPercentFor(64 * MB, 64 * MB), 0);
    assert.equal(growingPercentFor(500 * MB, 64 * MB), 0);
    assert.equal(growingPercentFor(11 * MB, 0), 0);
    assert.equal(growingPercentFor(0, 64 * MB), 0);
  });

  it('is released once per holder, in any order, and a release is idempotent', () => {
    const a = keepGcHeadroom({ headroomMb: 64 });
    const b = keepGcHeadroom({ headroomMb: 16 });
    const off = keepGcHeadroom({ headroomMb: 0 });
    a();
    a();
    off();
    b();
    // After the last release the flag is back at 0 and a new holder starts cleanly.
    const c = keepGcHeadroom();
    c();
  });
});
