/**
 * The lean gRPC transport's stall watch (frontends/grpc/h2/stall-watch.ts) on a fake connection:
 * which streams it resets, when it destroys the socket, and that progress holds it off.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode } from '@visionserve/h2';
import { StallWatch, type WatchedStream } from '../src/frontends/grpc/h2/stall-watch.js';
import { silentLogger } from '../src/util/logger.js';

interface Stream extends WatchedStream {
  sendWindow: number;
  sendProgressAt: number;
  drainProgressAt: number;
}

/** sendStallMs of the fake: the watch checks every 50 ms. */
const STALL_MS = 200;

function fakeHost() {
  const resets: [number, number][] = [];
  const host = {
    sendStallMs: STALL_MS,
    socket: {
      writableLength: 0,
      destroyed: false,
      destroy() {
        this.destroyed = true;
      },
    },
    blocked: new Set<Stream>(),
    draining: new Set<Stream>(),
    closed: false,
    resetStream(stream: Stream, code: number) {
      resets.push([stream.id, code]);
      host.blocked.delete(stream);
      host.draining.delete(stream);
    },
  };
  const watch = new StallWatch<Stream>({
    ...host,
    closed: () => host.closed,
    logger: silentLogger,
  });
  return { host, watch, resets };
}

const stream = (id: number, at: number, sendWindow = 0): Stream => ({
  id,
  sendWindow,
  sendProgressAt: at,
  drainProgressAt: at,
});

describe('StallWatch', () => {
  it('resets a blocked stream without window (CANCEL) and an answered stream whose client went quiet (NO_ERROR)', async () => {
    const { host, watch, resets } = fakeHost();
    const now = Date.now();
    host.blocked.add(stream(1, now));
    host.draining.add(stream(3, now));
    watch.arm();
    await sleep(STALL_MS * 2.5);
    watch.stop();
    assert.deepEqual(resets.sort(), [
      [1, ErrorCode.CANCEL],
      [3, ErrorCode.NO_ERROR],
    ]);
    assert.equal(host.socket.destroyed, false);
  });

  it('keeps a stream waiting only for the connection window while the connection sends', async () => {
    const { host, watch, resets } = fakeHost();
    host.blocked.add(stream(1, Date.now(), 1000));
    watch.arm();
    const until = Date.now() + STALL_MS * 2.5;
    while (Date.now() < until) {
      watch.sent(100);
      await sleep(20);
    }
    watch.stop();
    assert.deepEqual(resets, []);
  });

  it('destroys a socket whose queued writes make no progress, not one whose writes complete', async () => {
    const quiet = fakeHost();
    quiet.host.socket.writableLength = 1000;
    quiet.watch.arm();
    const progressing = fakeHost();
    progressing.host.socket.writableLength = 1000;
    progressing.watch.arm();
    const until = Date.now() + STALL_MS * 3;
    while (Date.now() < until) {
      progressing.watch.writeProgress();
      await sleep(20);
    }
    quiet.watch.stop();
    progressing.watch.stop();
    assert.equal(quiet.host.socket.destroyed, true);
    assert.equal(progressing.host.socket.destroyed, false);
  });

  it('stops checking once the connection is closed', async () => {
    const { host, watch, resets } = fakeHost();
    host.blocked.add(stream(1, Date.now()));
    host.closed = true;
    watch.arm();
    await sleep(STALL_MS * 2);
    assert.deepEqual(resets, []);
  });
});
