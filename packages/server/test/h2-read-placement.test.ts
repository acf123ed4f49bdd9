/**
 * The lean gRPC transport's read placement (frontends/grpc/h2/read-placement.ts): which buffer
 * each socket read goes into, and when a stream's room is free again.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  DIRECT_READ_MIN_BYTES,
  type PlacedStream,
  ReadPlacement,
} from '../src/frontends/grpc/h2/read-placement.js';

function streamWithRoom(room: Uint8Array | undefined): PlacedStream {
  return { into: () => room };
}

describe('ReadPlacement', () => {
  it('reads a DATA frame straight into the room its stream names, cut to the frame', () => {
    const placement = new ReadPlacement<PlacedStream>();
    const message = new Uint8Array(100_000);
    const room = message.subarray(5);
    const next = placement.next(streamWithRoom(room), 40_000);
    assert.equal(next.buffer, message.buffer);
    assert.equal(next.byteOffset, 5);
    assert.equal(next.byteLength, 40_000, 'the frame data left, not the whole room');
    const chunk = placement.arrived(1000, next);
    assert.equal(chunk.buffer, message.buffer);
    assert.equal(chunk.byteOffset, 5);
    assert.equal(chunk.byteLength, 1000);
  });

  it('uses the slab for small frames, small rooms and streams without a room', () => {
    const placement = new ReadPlacement<PlacedStream>();
    const big = new Uint8Array(100_000);
    const small = new Uint8Array(DIRECT_READ_MIN_BYTES - 1);
    for (const [stream, left] of [
      [streamWithRoom(big), DIRECT_READ_MIN_BYTES - 1],
      [streamWithRoom(small), 50_000],
      [streamWithRoom(undefined), 50_000],
      [undefined, 50_000],
    ] as const) {
      const next = placement.next(stream, left);
      assert.notEqual(next.buffer, big.buffer);
      assert.notEqual(next.buffer, small.buffer);
    }
  });

  it('never hands out slab bytes that were read into: later reads go after them, then a new slab', () => {
    const placement = new ReadPlacement<PlacedStream>();
    const first = placement.next(undefined, 0);
    const a = placement.arrived(1000, first);
    const second = placement.next(undefined, 0);
    assert.equal(second.buffer, first.buffer);
    assert.equal(second.byteOffset, a.byteOffset + 1000);
    placement.arrived(second.byteLength - 100, second);
    const third = placement.next(undefined, 0);
    assert.notEqual(third.buffer, first.buffer, 'a nearly full slab is replaced');
  });

  it('holds a stream room until the next read goes elsewhere or the socket closes', () => {
    const placement = new ReadPlacement<PlacedStream>();
    const stream = streamWithRoom(new Uint8Array(100_000));
    const other = streamWithRoom(undefined);
    let released = 0;
    placement.afterRoomReleased(stream, () => released++);
    assert.equal(released, 1, 'not holding: at once');
    placement.next(stream, 50_000);
    placement.afterRoomReleased(stream, () => released++);
    placement.afterRoomReleased(other, () => released++);
    assert.equal(released, 2, 'only the holder waits');
    placement.next(stream, 50_000);
    assert.equal(released, 2, 'the next read into the same room keeps it held');
    placement.next(undefined, 0);
    assert.equal(released, 3);
    placement.next(stream, 50_000);
    placement.afterRoomReleased(stream, () => released++);
    placement.release();
    assert.equal(released, 4);
  });
});
