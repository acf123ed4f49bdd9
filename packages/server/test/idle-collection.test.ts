import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  type IdleState,
  QUIET_BYTES,
  SLACK_BYTES,
  collectFully,
  decideCheck,
  startIdleCollection,
} from '../src/util/idle-collection.js';

const MiB = 1024 * 1024;

/** A watch's state: 10 MiB live after the last collection, 20 MiB committed, not quiet yet. */
function idleState(overrides: Partial<IdleState> = {}): IdleState {
  return {
    lastUsed: 10 * MiB,
    quietSinceMs: undefined,
    survivors: 10 * MiB,
    committed: 20 * MiB,
    trimmed: false,
    ...overrides,
  };
}

describe('idle collection', () => {
  it('collects only after the quiet time, and only with slack to give back', () => {
    const state = idleState();
    // Busy: allocating more than QUIET_BYTES per check.
    assert.equal(decideCheck(state, { used: 40 * MiB, total: 60 * MiB }, 0, 1000, true).collect, false);
    assert.equal(state.quietSinceMs, undefined);
    // Quiet from t=100, but not yet for 1000 ms.
    assert.equal(decideCheck(state, { used: 40 * MiB, total: 60 * MiB }, 100, 1000, true).collect, false);
    assert.equal(
      decideCheck(state, { used: 40 * MiB + QUIET_BYTES / 2, total: 60 * MiB }, 900, 1000, true).collect,
      false,
    );
    assert.equal(
      decideCheck(state, { used: 40 * MiB + QUIET_BYTES / 2, total: 60 * MiB }, 1100, 1000, true).collect,
      true,
    );
    // Quiet for long enough but nothing to give back; committed pages alone are reason enough.
    const lean = (used: number): IdleState => idleState({ lastUsed: used, quietSinceMs: 0, trimmed: true });
    const small = { used: 10 * MiB + SLACK_BYTES - MiB, total: 20 * MiB + SLACK_BYTES - MiB };
    assert.equal(decideCheck(lean(small.used), small, 5000, 1000, true).collect, false);
    assert.equal(
      decideCheck(lean(10 * MiB), { used: 10 * MiB, total: 20 * MiB + SLACK_BYTES }, 5000, 1000, true)
        .collect,
      true,
    );
  });

  it('stops watching when the collection cannot run', async () => {
    let calls = 0;
    let used = 10 * MiB;
    const stop = startIdleCollection({
      quietMs: 10,
      checkMs: 5,
      heap: () => ({ used, total: 200 * MiB }),
      collect: () => {
        calls++;
        throw new Error('no gc here');
      },
    });
    used = 100 * MiB; // a burst's garbage, then quiet
    await new Promise((r) => setTimeout(r, 150));
    stop();
    assert.equal(calls, 1);
  });

  it('runs one collection after a burst goes quiet, none while busy or after', async () => {
    let used = 10 * MiB;
    let total = 20 * MiB;
    let busy = true;
    let collections = 0;
    const churn = setInterval(() => {
      if (busy) {
        used += 4 * MiB;
        total = Math.max(total, used);
      }
    }, 5);
    const stop = startIdleCollection({
      quietMs: 60,
      checkMs: 10,
      heap: () => ({ used, total }),
      collect: () => {
        collections++;
        used = 10 * MiB;
        total = 22 * MiB;
      },
    });
    try {
      await new Promise((r) => setTimeout(r, 150));
      assert.equal(collections, 0, 'a busy heap is left alone');
      busy = false;
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(collections, 1);
      assert.equal(total, 22 * MiB);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(collections, 1, 'nothing to give back after the collection');
    } finally {
      clearInterval(churn);
      stop();
    }
  });

  it('decides a trim once per quiet time, a check after a collection, never while busy', () => {
    const state = idleState();
    const quiet = { used: 10 * MiB, total: 20 * MiB };
    assert.deepEqual(
      decideCheck(state, quiet, 0, 1000, false),
      { collect: false, trim: false },
      'not quiet long enough',
    );
    assert.deepEqual(
      decideCheck(state, quiet, 1000, 1000, true),
      { collect: false, trim: false },
      'requests in flight',
    );
    assert.deepEqual(decideCheck(state, quiet, 1500, 1000, false), { collect: false, trim: true });
    state.trimmed = true; // the watch does this when it trims
    assert.deepEqual(decideCheck(state, quiet, 2000, 1000, false), { collect: false, trim: false }, 'once');
    // A burst: the heap allocates, then goes quiet with garbage to collect.
    assert.deepEqual(decideCheck(state, { used: 60 * MiB, total: 80 * MiB }, 2500, 1000, false), {
      collect: false,
      trim: false,
    });
    assert.equal(state.trimmed, false, 'a busy check makes the next quiet time trim again');
    const garbage = { used: 60 * MiB, total: 80 * MiB };
    assert.deepEqual(
      decideCheck(state, garbage, 3500, 1000, false),
      { collect: false, trim: false },
      'quiet again, not long enough',
    );
    assert.deepEqual(decideCheck(state, garbage, 4500, 1000, false), { collect: true, trim: false });
    state.survivors = 10 * MiB; // the watch's collection
    state.committed = 22 * MiB;
    state.lastUsed = 10 * MiB;
    assert.deepEqual(decideCheck(state, { used: 10 * MiB, total: 22 * MiB }, 5000, 1000, false), {
      collect: false,
      trim: true,
    });
  });

  it('the watch trims after start once quiet, then once after each burst', async () => {
    let used = 10 * MiB;
    let busy = false;
    let trims = 0;
    const churn = setInterval(() => {
      if (busy) used += 2 * MiB;
    }, 5);
    const stop = startIdleCollection({
      quietMs: 40,
      checkMs: 10,
      heap: () => ({ used, total: Math.max(used, 20 * MiB) }),
      collect: () => {
        used = 10 * MiB;
      },
      trim: () => {
        trims++;
      },
    });
    /** Waits until `done`, up to 10 s (a loaded machine may hold timers up for long). */
    const until = async (done: () => boolean): Promise<void> => {
      const deadline = Date.now() + 10_000;
      while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    };
    try {
      await until(() => trims === 1);
      assert.equal(trims, 1, 'what loading left, once quiet after start');
      for (const expected of [2, 3]) {
        busy = true;
        await new Promise((r) => setTimeout(r, 100));
        busy = false;
        await until(() => trims === expected);
        assert.equal(trims, expected, `one trim after burst ${expected - 1}`);
      }
      await new Promise((r) => setTimeout(r, 150));
      assert.equal(trims, 3, 'no trim while nothing happens');
    } finally {
      clearInterval(churn);
      stop();
    }
  });

  it('is off at 0; its collection gives a real heap back', () => {
    assert.doesNotThrow(startIdleCollection({ quietMs: 0 }));
    // Garbage that survives into the old generation, dropped, then collected at once (no
    // turn of the event loop in between: the drop is this collection's).
    let ring: unknown[] = new Array(100_000);
    for (let i = 0; i < 1_000_000; i++) ring[i % ring.length] = { i, s: `x${i}` };
    ring = [];
    const before = process.memoryUsage().heapUsed;
    collectFully();
    const after = process.memoryUsage().heapUsed;
    assert.ok(after < before - SLACK_BYTES, `heap used ${before} -> ${after}`);
    assert.equal(ring.length, 0);
  });
});
