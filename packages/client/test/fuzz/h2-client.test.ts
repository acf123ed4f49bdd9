/**
 * Fuzz target `h2-client/hostile`: the client's own HTTP/2 gRPC channel (transport 'lean',
 * @visionserve/client) against a generated server. Each input is 1-4 sessions run at the same
 * time, each 1-6 calls on a channel of its own; for each call, the server answers with a script: a valid answer in an odd shape (HEADERS split
 * into CONTINUATIONs, padding, tiny DATA frames, PING / SETTINGS / WINDOW_UPDATE / PRIORITY /
 * unknown frames in between, trailers-only errors), or that answer edited (frames of random
 * type, flags, stream id and payload inserted or put in its place, broken HPACK, GOAWAY and
 * RST_STREAM at odd times, DATA beyond the windows, a byte flipped, the bytes cut, random
 * bytes), then the connection kept, ended, cut, or left silent. Oracle: every call settles
 * within its deadline + HANG slack, with the response's bytes (or the status's code) when the
 * script was valid on a clean connection, else with bytes or a ServingError; nothing throws out
 * of a socket callback; and a last call on the channel (the server well-behaved again) is
 * answered with the right bytes.
 *
 * The server is in-process: the channel's connections get a socket (`connect`) whose writes the
 * server parses synchronously and whose reads the server delivers through the channel's own
 * `onread` buffers (the connection's direct-read placement included), one read per chunk
 * with microtasks in between, as a TCP socket would. So the client's whole code path runs,
 * without the kernel, and a campaign reaches millions of inputs.
 */
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ServingError } from '@visionserve/protocol';
import {
  CLIENT_PREFACE,
  Flag,
  FrameReader,
  FrameType,
  Setting,
  encodeFrame,
  encodeGoaway,
  encodeHeaderBlock,
  encodeSettings,
  encodeUint32Frame,
} from '@visionserve/h2';
import { createH2GrpcChannel } from '@visionserve/client/h2';
import { fuzzAsync, targetOptions } from '@visionserve/testkit/campaign';

/** Receive window and frame size the channel advertises here: DATA beyond them is cheap to send. */
const WINDOW = 65_535;
const MAX_FRAME = 16_384;
/**
 * The deadline of a call whose stream a script may leave open (edited and kept, silent, or on a
 * connection an earlier edited script left dirty), ms: such an input costs this.
 */
const SHORT_DEADLINE_MS = 25;
/**
 * The deadline of every other call, ms: a valid answer, or a connection that ends, must settle
 * the call long before it (under any load), never by it.
 */
const LONG_DEADLINE_MS = 5000;
/** A call must settle this long after its deadline at the latest, ms. */
const SLACK_MS = 2000;

interface SocketReads {
  readonly buffer: () => Uint8Array;
  readonly callback: (n: number, buffer: Uint8Array) => boolean;
}

// ---- the script language

/** A frame with its stream id relative to the call's stream. */
interface FrameSpec {
  readonly type: number;
  readonly flags: number;
  /** 'own', 'next' (the id the client uses next), 'prev', 0, an even id, or a number. */
  readonly stream: 'own' | 'next' | 'prev' | 'even' | number;
  readonly payload: Uint8Array;
}

type Edit =
  | { readonly op: 'insert' | 'replace'; readonly at: number; readonly frame: FrameSpec }
  | { readonly op: 'delete'; readonly at: number }
  | { readonly op: 'flip'; readonly at: number; readonly xor: number }
  | { readonly op: 'cut'; readonly at: number }
  | { readonly op: 'garbage'; readonly bytes: Uint8Array }
  | { readonly op: 'flood'; readonly frames: number; readonly stream: 'own' | 0 };

interface CallScript {
  readonly message: Uint8Array;
  /** grpc-status of the trailers; not 0 with trailersOnly. */
  readonly status: number;
  readonly trailersOnly: boolean;
  /** Bytes per HEADERS / CONTINUATION fragment of the response head. */
  readonly headerSplit: number;
  readonly padHeaders: number | undefined;
  /** Bytes per DATA frame of the message. */
  readonly dataSplit: number;
  readonly padData: number | undefined;
  /** Valid frames put in between, each at a position. */
  readonly noise: readonly { readonly at: number; readonly frame: FrameSpec }[];
  /** Empty: a valid answer. */
  readonly edits: readonly Edit[];
  readonly terminal: 'keep' | 'end' | 'destroy' | 'silent';
  /** Bytes per read the client gets. */
  readonly chunk: number;
}

interface Session {
  /** The first SETTINGS of each connection, in order (undefined: none sent). */
  readonly openings: readonly (readonly (readonly [number, number])[] | undefined)[];
  readonly calls: readonly CallScript[];
  readonly request: Uint8Array;
}

function resolveStream(stream: FrameSpec['stream'], id: number): number {
  switch (stream) {
    case 'own':
      return id;
    case 'next':
      return id + 2;
    case 'prev':
      return Math.max(1, id - 2);
    case 'even':
      return id + 1;
    default:
      return stream;
  }
}

function encodeSpec(spec: FrameSpec, id: number): Buffer {
  return encodeFrame(spec.type, spec.flags, resolveStream(spec.stream, id), spec.payload);
}

function padded(fragment: Uint8Array, pad: number | undefined): Uint8Array {
  if (pad === undefined) return fragment;
  const out = new Uint8Array(1 + fragment.byteLength + pad);
  out[0] = pad;
  out.set(fragment, 1);
  return out;
}

/** A header block as HEADERS + CONTINUATION frames of `split` bytes. */
function headerFrames(id: number, block: Uint8Array, split: number, pad: number | undefined, end: boolean) {
  const frames: Buffer[] = [];
  let at = 0;
  do {
    const part = block.subarray(at, at + split);
    const first = at === 0;
    at += split;
    const last = at >= block.byteLength;
    const flags =
      (last ? Flag.END_HEADERS : 0) |
      (first && end ? Flag.END_STREAM : 0) |
      (first && pad !== undefined ? Flag.PADDED : 0);
    frames.push(
      encodeFrame(
        first ? FrameType.HEADERS : FrameType.CONTINUATION,
        flags,
        id,
        first ? padded(part, pad) : part,
      ),
    );
  } while (at < block.byteLength);
  return frames;
}

function framedMessage(message: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + message.byteLength);
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

/** The valid answer's frames, noise included. */
function validFrames(script: CallScript, id: number): Buffer[] {
  const head: [string, string][] = [
    [':status', '200'],
    ['content-type', 'application/grpc'],
  ];
  if (script.trailersOnly) {
    head.push(['grpc-status', String(script.status)], ['grpc-message', 'scripted']);
    const frames = headerFrames(id, encodeHeaderBlock(head), script.headerSplit, script.padHeaders, true);
    return withNoise(frames, script, id);
  }
  const frames = headerFrames(id, encodeHeaderBlock(head), script.headerSplit, script.padHeaders, false);
  const body = framedMessage(script.message);
  for (let at = 0; at < body.byteLength; at += script.dataSplit) {
    const part = body.subarray(at, at + script.dataSplit);
    const pad = script.padData;
    frames.push(encodeFrame(FrameType.DATA, pad === undefined ? 0 : Flag.PADDED, id, padded(part, pad)));
  }
  const trailers: [string, string][] = [['grpc-status', String(script.status)]];
  if (script.status !== 0) trailers.push(['grpc-message', 'scripted']);
  frames.push(...headerFrames(id, encodeHeaderBlock(trailers), script.headerSplit, undefined, true));
  return withNoise(frames, script, id);
}

function withNoise(frames: Buffer[], script: CallScript, id: number): Buffer[] {
  // Noise goes between frames but never inside a header block (HEADERS ... END_HEADERS).
  const boundaries: number[] = [0];
  let inBlock = false;
  for (let i = 0; i < frames.length; i++) {
    const type = frames[i]![3]!;
    const flags = frames[i]![4]!;
    if (type === FrameType.HEADERS || type === FrameType.CONTINUATION)
      inBlock = (flags & Flag.END_HEADERS) === 0;
    if (!inBlock) boundaries.push(i + 1);
  }
  const out = [...frames];
  // Inserted from the last position back, so that earlier positions stay valid.
  const placed = script.noise
    .map(({ at, frame }) => ({ position: boundaries[at % boundaries.length]!, frame }))
    .sort((a, b) => b.position - a.position);
  for (const { position, frame } of placed) {
    // A reset of the previous stream: the first stream has none.
    if (frame.stream === 'prev' && id === 1) continue;
    out.splice(position, 0, encodeSpec(frame, id));
  }
  return out;
}

function applyEdits(frames: Buffer[], edits: readonly Edit[], id: number): Buffer {
  const out = [...frames];
  let tail: Buffer[] = [];
  let cut: number | undefined;
  let flip: { at: number; xor: number } | undefined;
  for (const edit of edits) {
    switch (edit.op) {
      case 'insert':
        out.splice(edit.at % (out.length + 1), 0, encodeSpec(edit.frame, id));
        break;
      case 'replace':
        if (out.length > 0) out[edit.at % out.length] = encodeSpec(edit.frame, id);
        break;
      case 'delete':
        if (out.length > 0) out.splice(edit.at % out.length, 1);
        break;
      case 'flip':
        flip = edit;
        break;
      case 'cut':
        cut = edit.at;
        break;
      case 'garbage':
        tail.push(Buffer.from(edit.bytes));
        break;
      case 'flood': {
        // DATA past the receive windows: `frames` frames of the whole frame size.
        const payload = Buffer.alloc(MAX_FRAME);
        const stream = edit.stream === 'own' ? id : 0;
        tail = [
          ...Array.from({ length: edit.frames }, () => encodeFrame(FrameType.DATA, 0, stream, payload)),
          ...tail,
        ];
        break;
      }
    }
  }
  let bytes = Buffer.concat([...out, ...tail]);
  if (flip !== undefined && bytes.byteLength > 0) {
    bytes = Buffer.from(bytes);
    const at = flip.at % bytes.byteLength;
    bytes[at] = bytes[at]! ^ (flip.xor || 1);
  }
  if (cut !== undefined && bytes.byteLength > 0) bytes = bytes.subarray(0, cut % bytes.byteLength);
  return bytes;
}

// ---- the in-process server

/** The client's end of one in-process connection: what H2ClientConnection uses of a net.Socket. */
class PipeSocket extends EventEmitter {
  destroyed = false;
  constructor(private readonly peer: FakeServerConnection) {
    super();
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  cork(): void {}
  uncork(): void {}
  write(chunk: Uint8Array, callback?: () => void): boolean {
    if (!this.destroyed) this.peer.fromClient(chunk);
    if (callback) queueMicrotask(callback);
    return true;
  }
  end(chunk?: Uint8Array): this {
    if (chunk !== undefined) this.write(chunk);
    this.peer.clientEnded();
    return this;
  }
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.peer.clientEnded();
    setImmediate(() => this.emit('close'));
    return this;
  }
}

type Delivery = Buffer | 'end' | 'destroy';

/** One connection's server: parses what the client writes, answers with the scripts. */
class FakeServerConnection {
  readonly socket: PipeSocket;
  private readonly reader: FrameReader;
  private prefaceLeft = CLIENT_PREFACE.byteLength;
  private readonly seen = new Set<number>();
  private queue: Delivery[] = [];
  private pumping: Promise<void> | undefined;
  private gone = false;
  /** A hostile script ran here: later answers on it may fail. */
  dirty = false;

  constructor(
    private readonly harness: Harness,
    private readonly reads: SocketReads,
    opening: readonly (readonly [number, number])[] | undefined,
  ) {
    this.socket = new PipeSocket(this);
    this.reader = new FrameReader(
      {
        onFrame: (type, flags, streamId) => {
          if (type === FrameType.SETTINGS && (flags & Flag.ACK) === 0)
            this.send(encodeFrame(FrameType.SETTINGS, Flag.ACK, 0), 1 << 20);
          if (type === FrameType.HEADERS && !this.seen.has(streamId)) {
            this.seen.add(streamId);
            this.answer(streamId);
          }
        },
        onDataStart: () => undefined,
        onData: () => undefined,
        onDataEnd: () => undefined,
        onFrameError: () => {
          harness.fail(new Error('the client sent a malformed frame'));
        },
      },
      1 << 24,
      1 << 20,
    );
    if (opening !== undefined) this.send(encodeSettings(opening), 1 << 20);
  }

  fromClient(chunk: Uint8Array): void {
    let bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.prefaceLeft > 0) {
      const take = Math.min(this.prefaceLeft, bytes.byteLength);
      const want = CLIENT_PREFACE.subarray(CLIENT_PREFACE.byteLength - this.prefaceLeft).subarray(0, take);
      if (!want.equals(bytes.subarray(0, take))) this.harness.fail(new Error('bad client preface'));
      this.prefaceLeft -= take;
      bytes = bytes.subarray(take);
    }
    if (bytes.byteLength > 0) this.reader.push(bytes);
  }

  clientEnded(): void {
    this.gone = true;
  }

  private answer(id: number): void {
    const script = this.harness.take();
    if (script === undefined) {
      this.send(Buffer.concat(validFrames(CLEAN_SCRIPT, id)), 1 << 20);
      return;
    }
    const frames = validFrames(script, id);
    if (script.edits.length > 0) this.dirty = true;
    this.send(applyEdits(frames, script.edits, id), script.chunk);
    if (script.terminal === 'end' || script.terminal === 'destroy') this.queue.push(script.terminal);
    this.pump();
  }

  send(bytes: Buffer, chunk: number): void {
    for (let at = 0; at < bytes.byteLength; at += chunk) this.queue.push(bytes.subarray(at, at + chunk));
    this.pump();
  }

  /** The server ends the connection (a well-behaved server going away). */
  end(): void {
    this.queue.push('end');
    this.pump();
  }

  idle(): Promise<void> {
    return this.pumping ?? Promise.resolve();
  }

  private pump(): void {
    if (this.pumping !== undefined || this.queue.length === 0) return;
    this.pumping = this.deliver();
  }

  /** Delivers the queue, one read per chunk, with the microtasks of each read run before the next. */
  private async deliver(): Promise<void> {
    // The queue is not empty here (pump), so `pumping` is set before the loop can end; it is
    // cleared in the same tick as the last look at the queue, so no item is left behind.
    while (this.queue.length > 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      const item = this.queue.shift()!;
      if (this.gone || this.socket.destroyed) {
        this.queue = [];
        break;
      }
      this.harness.guard(() => {
        if (item === 'end') {
          this.gone = true;
          this.socket.emit('end');
          this.socket.destroy();
        } else if (item === 'destroy') {
          this.gone = true;
          this.socket.destroy();
        } else this.read(item);
      });
    }
    this.pumping = undefined;
  }

  private read(bytes: Buffer): void {
    let at = 0;
    while (at < bytes.byteLength && !this.socket.destroyed) {
      const target = this.reads.buffer();
      const n = Math.min(target.byteLength, bytes.byteLength - at);
      target.set(bytes.subarray(at, at + n), 0);
      at += n;
      this.reads.callback(n, target);
    }
  }
}

/** Scripts, connections and faults of one input. */
class Harness {
  readonly connections: FakeServerConnection[] = [];
  private next: CallScript | undefined;
  private openings: Session['openings'];
  fault: Error | undefined;

  constructor(openings: Session['openings']) {
    this.openings = openings;
  }

  /** Connections opened whose server sent no SETTINGS. */
  silentOpenings = 0;

  readonly connect = (reads: SocketReads): net.Socket => {
    const [opening, ...rest] = this.openings.length > 0 ? this.openings : [CLEAN_OPENING];
    this.openings = rest;
    if (opening === undefined) this.silentOpenings++;
    const connection = new FakeServerConnection(this, reads, opening);
    this.connections.push(connection);
    return connection.socket as unknown as net.Socket;
  };

  /** The next stream's script (each one answers one stream; later streams get a clean answer). */
  expect(script: CallScript): void {
    this.next = script;
  }

  take(): CallScript | undefined {
    const script = this.next;
    this.next = undefined;
    return script;
  }

  /** Runs a socket callback of the client: whatever it throws is a failure. */
  guard(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.fail(error);
    }
  }

  fail(error: unknown): void {
    this.fault ??= error instanceof Error ? error : new Error(String(error));
  }

  async idle(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      await Promise.all(this.connections.map((c) => c.idle()));
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
}

const CLEAN_OPENING: readonly (readonly [number, number])[] = [[Setting.MAX_FRAME_SIZE, MAX_FRAME]];
const CLEAN_SCRIPT: CallScript = {
  message: Buffer.from('the last call'),
  status: 0,
  trailersOnly: false,
  headerSplit: 1 << 20,
  padHeaders: undefined,
  dataSplit: 1 << 20,
  padData: undefined,
  noise: [],
  edits: [],
  terminal: 'keep',
  chunk: 1 << 20,
};

// ---- generators

const bytesArb = (max: number) => fc.uint8Array({ maxLength: max });
const streamArb: fc.Arbitrary<FrameSpec['stream']> = fc.oneof(
  { weight: 6, arbitrary: fc.constant('own' as const) },
  { weight: 2, arbitrary: fc.constantFrom('next' as const, 'prev' as const, 'even' as const, 0) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 ** 31 - 1 }) },
);

const settingsPayload = fc
  .array(
    fc.tuple(
      fc.integer({ min: 0, max: 9 }),
      fc.oneof(
        fc.integer({ min: 0, max: 70_000 }),
        fc.constantFrom(0, 16_383, 16_777_216, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1),
      ),
    ),
    { maxLength: 4 },
  )
  .map((entries) => encodeSettings(entries).subarray(9));

/** Frames of any type, flags, stream and payload: structured payloads for the known types. */
const randomFrameArb: fc.Arbitrary<FrameSpec> = fc
  .record({
    type: fc.oneof(
      { weight: 9, arbitrary: fc.integer({ min: 0, max: 9 }) },
      fc.integer({ min: 10, max: 255 }),
    ),
    flags: fc.oneof(
      fc.constantFrom(0, Flag.END_STREAM, Flag.END_HEADERS, Flag.ACK, 0x05, 0x08, 0x20),
      fc.integer({ min: 0, max: 255 }),
    ),
    stream: streamArb,
    raw: bytesArb(40),
    word: fc.oneof(fc.constantFrom(0, 1, 2 ** 31 - 1, 2 ** 32 - 1), fc.nat()),
    code: fc.integer({ min: 0, max: 14 }),
    settings: settingsPayload,
    hpack: fc.oneof(
      bytesArb(30),
      fc
        .array(
          fc.tuple(
            fc.constantFrom(':status', 'grpc-status', 'content-type', 'x-a', 'grpc-message'),
            fc.string({ maxLength: 8 }),
          ),
          {
            maxLength: 4,
          },
        )
        .map((fields) => encodeHeaderBlock(fields)),
    ),
  })
  .map(({ type, flags, stream, raw, word, code, settings, hpack }): FrameSpec => {
    const u32 = (value: number) => {
      const b = Buffer.alloc(4);
      b.writeUInt32BE(value >>> 0);
      return b;
    };
    switch (type) {
      case FrameType.SETTINGS:
        return {
          type,
          flags,
          stream,
          payload: flags & Flag.ACK ? raw.subarray(0, raw.byteLength % 3 === 0 ? 0 : 6) : settings,
        };
      case FrameType.WINDOW_UPDATE:
      case FrameType.RST_STREAM:
        return { type, flags, stream, payload: type === FrameType.RST_STREAM ? u32(code) : u32(word) };
      case FrameType.GOAWAY:
        return { type, flags, stream, payload: Buffer.concat([u32(word), u32(code), raw.subarray(0, 8)]) };
      case FrameType.PING:
        return { type, flags, stream, payload: raw.byteLength % 4 === 0 ? Buffer.alloc(8) : raw };
      case FrameType.HEADERS:
      case FrameType.CONTINUATION:
        return { type, flags, stream, payload: hpack };
      default:
        return { type, flags, stream, payload: raw };
    }
  });

/** Frames a server may send at any time between others: nothing here changes the answer. */
const noiseArb: fc.Arbitrary<FrameSpec> = fc.oneof(
  fc.record({
    type: fc.constant(FrameType.PING),
    flags: fc.constantFrom(0, Flag.ACK),
    stream: fc.constant(0 as const),
    payload: fc.uint8Array({ minLength: 8, maxLength: 8 }),
  }),
  fc.constant<FrameSpec>({
    type: FrameType.SETTINGS,
    flags: Flag.ACK,
    stream: 0,
    payload: new Uint8Array(0),
  }),
  fc.integer({ min: 16_384, max: 1 << 20 }).map((size): FrameSpec => ({
    type: FrameType.SETTINGS,
    flags: 0,
    stream: 0,
    payload: encodeSettings([
      [Setting.MAX_FRAME_SIZE, size],
      [Setting.HEADER_TABLE_SIZE, 0],
    ]).subarray(9),
  })),
  fc
    .tuple(fc.constantFrom<'own' | 0>('own', 0), fc.integer({ min: 1, max: 100_000 }))
    .map(([stream, n]): FrameSpec => ({
      type: FrameType.WINDOW_UPDATE,
      flags: 0,
      stream,
      payload: encodeUint32Frame(FrameType.WINDOW_UPDATE, 0, n).subarray(9),
    })),
  fc.constant<FrameSpec>({
    type: FrameType.PRIORITY,
    flags: 0,
    stream: 'own',
    payload: Buffer.from([0, 0, 0, 0, 16]),
  }),
  fc
    .tuple(fc.integer({ min: 10, max: 255 }), fc.integer({ min: 0, max: 255 }), streamArb, bytesArb(20))
    .map(([type, flags, stream, payload]): FrameSpec => ({ type, flags, stream, payload })),
  // RST_STREAM of a stream already closed (or never used here) is ignored.
  fc.constant<FrameSpec>({
    type: FrameType.RST_STREAM,
    flags: 0,
    stream: 'prev',
    payload: Buffer.from([0, 0, 0, 8]),
  }),
);

const editArb: fc.Arbitrary<Edit> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constantFrom('insert' as const, 'replace' as const),
      at: fc.nat(40),
      frame: randomFrameArb,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('delete' as const), at: fc.nat(40) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('flip' as const),
      at: fc.nat(),
      xor: fc.integer({ min: 0, max: 255 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('cut' as const), at: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('garbage' as const), bytes: bytesArb(64) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('flood' as const),
      frames: fc.integer({ min: 1, max: 6 }),
      stream: fc.constantFrom<'own' | 0>('own', 0),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('insert' as const),
      at: fc.nat(40),
      frame: fc
        .tuple(fc.nat(), fc.integer({ min: 0, max: 14 }), fc.boolean())
        .map(([last, code, goaway]): FrameSpec =>
          goaway
            ? {
                type: FrameType.GOAWAY,
                flags: 0,
                stream: 0,
                payload: encodeGoaway(last % 8, code).subarray(9),
              }
            : {
                type: FrameType.RST_STREAM,
                flags: 0,
                stream: 'own',
                payload: encodeUint32Frame(FrameType.RST_STREAM, 0, code).subarray(9),
              },
        ),
    }),
  },
);

const callArb: fc.Arbitrary<CallScript> = fc
  .record({
    message: fc.oneof({ weight: 4, arbitrary: bytesArb(64) }, { weight: 1, arbitrary: bytesArb(70_000) }),
    status: fc.oneof(
      { weight: 4, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 16 }) },
    ),
    trailersOnly: fc.boolean(),
    headerSplit: fc.oneof(fc.constant(1 << 20), fc.integer({ min: 1, max: 20 })),
    padHeaders: fc.option(fc.integer({ min: 0, max: 20 }), { freq: 3 }),
    dataSplit: fc.oneof(fc.constant(1 << 20), fc.integer({ min: 1, max: 9000 })),
    padData: fc.option(fc.integer({ min: 0, max: 255 }), { freq: 3 }),
    noise: fc.array(fc.record({ at: fc.nat(), frame: noiseArb }), { maxLength: 3 }),
    edits: fc.oneof(
      { weight: 2, arbitrary: fc.constant<Edit[]>([]) },
      { weight: 3, arbitrary: fc.array(editArb, { minLength: 1, maxLength: 3 }) },
    ),
    terminal: fc.oneof(
      { weight: 30, arbitrary: fc.constantFrom('keep' as const, 'end' as const, 'destroy' as const) },
      { weight: 1, arbitrary: fc.constant('silent' as const) },
    ),
    chunk: fc.oneof(
      { weight: 3, arbitrary: fc.constant(1 << 20) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 300 }) },
    ),
  })
  .map((c) => ({
    ...c,
    padHeaders: c.padHeaders ?? undefined,
    padData: c.padData ?? undefined,
    // Trailers-only answers carry an error; a valid one with status 0 needs its message.
    trailersOnly: c.trailersOnly && c.status !== 0,
    // A valid answer cut at 1-byte reads of 70 KB would only cost time.
    chunk: c.message.byteLength > 1000 ? Math.max(c.chunk, 4096) : c.chunk,
    dataSplit: c.message.byteLength > 1000 ? Math.max(c.dataSplit, 1024) : c.dataSplit,
  }));

const openingArb = fc.option(
  fc.oneof(
    { weight: 4, arbitrary: fc.constant(CLEAN_OPENING) },
    {
      weight: 2,
      arbitrary: fc.array(
        fc.oneof(
          fc.tuple(fc.constant(Setting.MAX_FRAME_SIZE), fc.integer({ min: 16_384, max: 16_777_215 })),
          // Room left under 2^31-1 for the WINDOW_UPDATEs of the noise.
          fc.tuple(
            fc.constant(Setting.INITIAL_WINDOW_SIZE),
            fc.integer({ min: 0, max: 2 ** 31 - 1 - 400_000 }),
          ),
          fc.tuple(fc.constant(Setting.MAX_CONCURRENT_STREAMS), fc.integer({ min: 1, max: 1000 })),
          fc.tuple(fc.constant(Setting.HEADER_TABLE_SIZE), fc.nat()),
          fc.tuple(fc.integer({ min: 7, max: 0xffff }), fc.nat()),
        ),
        { maxLength: 4 },
      ),
    },
  ),
  { freq: 20 },
);

const sessionArb: fc.Arbitrary<Session> = fc.record({
  openings: fc.array(openingArb, { maxLength: 3 }).map((list) => list.map((o) => o ?? undefined)),
  calls: fc.array(callArb, { minLength: 1, maxLength: 6 }),
  request: fc.oneof({ weight: 5, arbitrary: bytesArb(100) }, { weight: 1, arbitrary: bytesArb(80_000) }),
});

/** An input: sessions on channels of their own, run at the same time (their waits overlap). */
const inputArb = fc.array(sessionArb, { minLength: 1, maxLength: 4 });

// ---- the property

type Settled = { ok: true; value: Uint8Array } | { ok: false; error: unknown };

async function settle(promise: Promise<Uint8Array>, deadlineMs: number): Promise<Settled> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`did not settle within ${deadlineMs + SLACK_MS} ms`));
    }, deadlineMs + SLACK_MS);
  });
  try {
    return { ok: true, value: await Promise.race([promise, limit]) };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('did not settle')) throw error;
    return { ok: false, error };
  } finally {
    clearTimeout(timer);
  }
}

const tally = {
  deadlines: 0,
  inputs: 0,
  sessions: 0,
  calls: 0,
  exact: 0,
  failed: 0,
  resolved: 0,
  connections: 0,
};

function checkOutcome(out: Settled, script: CallScript, clean: boolean): void {
  tally.calls++;
  if (!out.ok) {
    assert.ok(out.error instanceof ServingError, `rejected with a foreign error: ${String(out.error)}`);
    tally.failed++;
    if (/^Deadline of/.test((out.error as Error).message)) tally.deadlines++;
  } else {
    assert.ok(out.value instanceof Uint8Array);
    tally.resolved++;
  }
  if (!clean || script.edits.length > 0 || script.terminal === 'silent') return;
  // A valid answer on a clean connection: exactly its bytes, or exactly its status.
  tally.exact++;
  if (script.status === 0) {
    assert.ok(out.ok, `a valid answer failed: ${out.ok ? '' : String(out.error)}`);
    assert.deepEqual(Buffer.from(out.value), Buffer.from(script.message));
  } else {
    assert.ok(!out.ok, 'an error status resolved');
    assert.equal((out.error as ServingError).code, script.status, String(out.error));
  }
}

async function runInput(sessions: readonly Session[]): Promise<void> {
  tally.inputs++;
  await Promise.all(sessions.map(runSession));
}

/** One session: its calls in order on one channel, then the next call the channel must serve. */
async function runSession(input: Session): Promise<void> {
  tally.sessions++;
  const harness = new Harness(input.openings);
  const channel = createH2GrpcChannel({
    address: '127.0.0.1:1',
    connect: harness.connect,
    windowBytes: WINDOW,
    maxFrameBytes: MAX_FRAME,
  });
  try {
    for (const script of input.calls) {
      const connection = harness.connections.at(-1);
      const clean = connection === undefined || !connection.dirty;
      harness.expect(script);
      const silentBefore = harness.silentOpenings;
      const bounded =
        clean &&
        (script.edits.length === 0 || script.terminal === 'end' || script.terminal === 'destroy') &&
        script.terminal !== 'silent';
      const deadline = bounded ? LONG_DEADLINE_MS : SHORT_DEADLINE_MS;
      const out = await settle(
        channel.unary('/fuzz.F/Call', input.request, { timeoutMs: deadline }),
        deadline,
      );
      // A call sent again (refused, or past a GOAWAY's last stream id) waits for the new
      // connection's SETTINGS: a server that sends none holds it to its deadline.
      if (
        bounded &&
        harness.silentOpenings === silentBefore &&
        !out.ok &&
        out.error instanceof ServingError
      ) {
        // Ended by the answer or by the connection's end, not by the deadline.
        assert.doesNotMatch(out.error.message, /^Deadline of/, 'settled only by its deadline');
      }
      await harness.idle();
      if (harness.fault !== undefined) throw harness.fault;
      checkOutcome(out, script, clean);
      harness.take();
    }
    // The server behaves again: a connection a hostile script left open is ended, and the
    // channel must serve the next call (on a kept clean connection or a new one).
    for (const c of harness.connections) if (c.dirty) c.end();
    await harness.idle();
    harness.expect(CLEAN_SCRIPT);
    const last = await settle(
      channel.unary('/fuzz.F/Call', input.request, { timeoutMs: LONG_DEADLINE_MS }),
      LONG_DEADLINE_MS,
    );
    await harness.idle();
    if (harness.fault !== undefined) throw harness.fault;
    assert.ok(last.ok, `the next call failed: ${last.ok ? '' : String(last.error)}`);
    assert.deepEqual(Buffer.from(last.value), Buffer.from(CLEAN_SCRIPT.message));
  } finally {
    tally.connections += harness.connections.length;
    channel.close();
  }
}

describe('fuzz: the lean gRPC channel against a hostile HTTP/2 server', () => {
  it('h2-client/hostile', targetOptions('h2-client/hostile', 300_000), async (t) => {
    await fuzzAsync(
      t,
      'h2-client/hostile',
      fc.asyncProperty(inputArb, runInput),
      400,
      () =>
        `; ${tally.sessions} sessions, ${tally.calls} scripted calls (${tally.exact} valid answers checked exactly, ${tally.resolved} resolved, ${tally.failed} failed with a ServingError, ${tally.deadlines} of them at the deadline), ${tally.connections} connections`,
    );
  });
});
