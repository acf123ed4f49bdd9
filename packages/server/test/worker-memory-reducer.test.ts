/**
 * Inference workers start without V8's memory reducer (runtime/worker-memory-reducer.ts),
 * which ran a full GC on the worker thread every ~8 s of steady load. V8 reads the flag when
 * an isolate is created, so the helper turns it off around a worker's start and back on once
 * the worker is online. (When the reducer runs in a heap is up to V8's heuristics, too
 * irregular for a test to wait for; these tests observe the flag.)
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { startWithoutMemoryReducer } from '../src/runtime/worker-memory-reducer.js';

/** Enough of a Worker for the helper: it listens for 'online' and 'exit'. */
const fakeWorker = (): Worker => new EventEmitter() as unknown as Worker;

describe('startWithoutMemoryReducer', () => {
  it('turns the reducer off before the start and on again once the worker is online', () => {
    const flags: string[] = [];
    const worker = fakeWorker();
    const started = startWithoutMemoryReducer(() => {
      flags.push('start');
      return worker;
    }, flags.push.bind(flags));
    assert.equal(started, worker);
    assert.deepEqual(flags, ['--no-memory-reducer', 'start']);
    worker.emit('online');
    worker.emit('exit', 0);
    assert.deepEqual(flags, ['--no-memory-reducer', 'start', '--memory-reducer']);
  });

  it('keeps it off while any worker is still starting; a worker that dies first also counts', () => {
    const flags: string[] = [];
    const set = flags.push.bind(flags);
    const a = fakeWorker();
    const b = fakeWorker();
    startWithoutMemoryReducer(() => a, set);
    startWithoutMemoryReducer(() => b, set);
    a.emit('online');
    assert.deepEqual(flags, ['--no-memory-reducer']);
    b.emit('exit', 1); // failed before it ran
    assert.deepEqual(flags, ['--no-memory-reducer', '--memory-reducer']);
  });

  it('turns it on again when the worker cannot be constructed', () => {
    const flags: string[] = [];
    assert.throws(
      () =>
        startWithoutMemoryReducer(() => {
          throw new Error('no threads');
        }, flags.push.bind(flags)),
      /no threads/,
    );
    assert.deepEqual(flags, ['--no-memory-reducer', '--memory-reducer']);
  });

  it('starts a real worker thread that runs', async () => {
    const worker = startWithoutMemoryReducer(
      () => new Worker("require('node:worker_threads').parentPort.postMessage(6 * 7)", { eval: true }),
    );
    const answer = await new Promise((resolve) => worker.once('message', resolve));
    assert.equal(answer, 42);
    await worker.terminate();
  });
});
