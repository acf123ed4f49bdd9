/**
 * The HTTP/2 connection core both endpoints compose (ConnectionCore, ReceiveWindow,
 * HeaderBlockAssembler): the SETTINGS, WINDOW_UPDATE and header-block rules, on a recording
 * endpoint.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ConnectionCore,
  ErrorCode,
  Flag,
  FrameType,
  H2ConnectionError,
  HeaderBlockAssembler,
  MAX_WINDOW,
  ReceiveWindow,
  Setting,
  encodeSettings,
} from '../src/index.js';

interface Stream {
  sendWindow: number;
}

function setup(streams: Map<number, Stream>) {
  const events: string[] = [];
  const core = new ConnectionCore<Stream>(
    {
      windowStream: (id) => streams.get(id),
      openStreams: () => streams.values(),
      streamWindowError: (_stream, code) => events.push(`stream-error ${code}`),
      connectionWindowOpened: () => events.push('connection-open'),
      streamWindowOpened: () => events.push('stream-open'),
      write: (bytes) => events.push(`write type ${bytes[3]} flags ${bytes[4]}`),
    },
    { receiveWindow: 100, maxControlFrames: 3, floodWindowMs: 60_000 },
  );
  return { core, events };
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const settings = (entries: [number, number][]) => encodeSettings(entries).subarray(9);
const code = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof H2ConnectionError, String(error));
    return error.code;
  }
  return undefined;
};

describe('HTTP/2 connection core', () => {
  it('applies SETTINGS, moves open stream windows, and acks them', () => {
    const streams = new Map([[1, { sendWindow: 10 }]]);
    const { core, events } = setup(streams);
    assert.equal(
      core.onSettings(
        0,
        0,
        settings([
          [Setting.INITIAL_WINDOW_SIZE, 65_545],
          [Setting.MAX_FRAME_SIZE, 20_000],
          [Setting.MAX_CONCURRENT_STREAMS, 7],
        ]),
      ),
      true,
    );
    assert.equal(streams.get(1)!.sendWindow, 20);
    assert.equal(core.peerInitialWindow, 65_545);
    assert.equal(core.peerMaxFrame, 20_000);
    assert.equal(core.peerMaxStreams, 7);
    assert.deepEqual(events, [`write type ${FrameType.SETTINGS} flags ${Flag.ACK}`]);
    assert.equal(core.onSettings(Flag.ACK, 0, Buffer.alloc(0)), false);
  });

  it('rejects bad SETTINGS with the RFC 9113 codes', () => {
    const { core } = setup(new Map([[1, { sendWindow: MAX_WINDOW }]]));
    assert.equal(
      code(() => core.onSettings(0, 1, Buffer.alloc(0))),
      ErrorCode.PROTOCOL_ERROR,
    );
    assert.equal(
      code(() => core.onSettings(Flag.ACK, 0, Buffer.alloc(6))),
      ErrorCode.FRAME_SIZE_ERROR,
    );
    assert.equal(
      code(() => core.onSettings(0, 0, Buffer.alloc(5))),
      ErrorCode.FRAME_SIZE_ERROR,
    );
    assert.equal(
      code(() => core.onSettings(0, 0, settings([[Setting.ENABLE_PUSH, 2]]))),
      ErrorCode.PROTOCOL_ERROR,
    );
    assert.equal(
      code(() => core.onSettings(0, 0, settings([[Setting.MAX_FRAME_SIZE, 16_383]]))),
      ErrorCode.PROTOCOL_ERROR,
    );
    assert.equal(
      code(() => core.onSettings(0, 0, settings([[Setting.INITIAL_WINDOW_SIZE, 2 ** 31]]))),
      ErrorCode.FLOW_CONTROL_ERROR,
    );
    // 65,536: the stream's window goes one past 2^31-1.
    assert.equal(
      code(() => core.onSettings(0, 0, settings([[Setting.INITIAL_WINDOW_SIZE, 65_536]]))),
      ErrorCode.FLOW_CONTROL_ERROR,
    );
  });

  it('WINDOW_UPDATE: connection and stream windows, zero increments and overflow', () => {
    const streams = new Map([[1, { sendWindow: 0 }]]);
    const { core, events } = setup(streams);
    core.onWindowUpdate(0, u32(10));
    assert.equal(core.sendWindow, 65_545);
    core.onWindowUpdate(1, u32(0x80000000 + 5)); // the reserved bit is ignored
    assert.equal(streams.get(1)!.sendWindow, 5);
    core.onWindowUpdate(3, u32(5)); // a closed stream: ignored
    core.onWindowUpdate(1, u32(0));
    core.onWindowUpdate(1, u32(MAX_WINDOW));
    assert.deepEqual(events, [
      'connection-open',
      'stream-open',
      `stream-error ${ErrorCode.PROTOCOL_ERROR}`,
      `stream-error ${ErrorCode.FLOW_CONTROL_ERROR}`,
    ]);
    assert.equal(
      code(() => {
        core.onWindowUpdate(0, u32(0));
      }),
      ErrorCode.PROTOCOL_ERROR,
    );
    assert.equal(
      code(() => {
        core.onWindowUpdate(0, Buffer.alloc(3));
      }),
      ErrorCode.FRAME_SIZE_ERROR,
    );
    assert.equal(
      code(() => {
        core.onWindowUpdate(0, u32(MAX_WINDOW));
      }),
      ErrorCode.FLOW_CONTROL_ERROR,
    );
  });

  it('answers PINGs up to the flood limit, then ENHANCE_YOUR_CALM', () => {
    const { core, events } = setup(new Map());
    assert.equal(core.onPing(Flag.ACK, 0, Buffer.alloc(8)), true);
    for (let i = 0; i < 3; i++) assert.equal(core.onPing(0, 0, Buffer.alloc(8)), false);
    assert.equal(events.length, 3);
    assert.equal(
      code(() => core.onPing(0, 0, Buffer.alloc(8))),
      ErrorCode.ENHANCE_YOUR_CALM,
    );
    assert.equal(
      code(() => core.onPing(0, 1, Buffer.alloc(8))),
      ErrorCode.PROTOCOL_ERROR,
    );
  });

  it('a receive window refuses bytes past it and gives back what was taken', () => {
    const window = new ReceiveWindow(100);
    assert.equal(window.take(60), true);
    assert.equal(window.halfUsed, true);
    assert.equal(window.take(41), false);
    assert.equal(window.take(40), true);
    assert.equal(window.release(), 100);
    assert.equal(window.take(100), true);
  });

  it('assembles HEADERS + CONTINUATION, strips padding and priority, and bounds the block', () => {
    const blocks = new HeaderBlockAssembler(10, 2);
    const padded = Buffer.from([2, 0, 0, 0, 3, 9, 0xaa, 0xbb, 0, 0]);
    const first = blocks.headers(Flag.PADDED | Flag.PRIORITY | Flag.END_STREAM, 3, padded);
    assert.equal(first, undefined);
    assert.equal(blocks.open, true);
    const whole = blocks.continuation(Flag.END_HEADERS, 3, Buffer.from([0xcc]));
    assert.deepEqual([...whole!.block], [0xaa, 0xbb, 0xcc]);
    assert.equal(whole!.selfDependent, true);
    assert.equal(whole!.flags & Flag.END_STREAM, Flag.END_STREAM);
    assert.equal(blocks.open, false);
    assert.equal(
      code(() => blocks.continuation(Flag.END_HEADERS, 3, Buffer.alloc(1))),
      ErrorCode.PROTOCOL_ERROR,
    );
    blocks.headers(0, 5, Buffer.alloc(1));
    blocks.continuation(0, 5, Buffer.alloc(1));
    blocks.continuation(0, 5, Buffer.alloc(1));
    assert.equal(
      code(() => blocks.continuation(0, 5, Buffer.alloc(1))),
      ErrorCode.ENHANCE_YOUR_CALM,
    );
    const small = new HeaderBlockAssembler(4);
    small.headers(0, 1, Buffer.alloc(3));
    assert.equal(
      code(() => small.continuation(0, 1, Buffer.alloc(2))),
      ErrorCode.ENHANCE_YOUR_CALM,
    );
    assert.equal(
      code(() => small.headers(Flag.END_HEADERS, 0, Buffer.alloc(1))),
      ErrorCode.PROTOCOL_ERROR,
    );
    assert.equal(
      code(() => small.headers(Flag.PADDED | Flag.END_HEADERS, 1, Buffer.from([5]))),
      ErrorCode.PROTOCOL_ERROR,
    );
  });
});
