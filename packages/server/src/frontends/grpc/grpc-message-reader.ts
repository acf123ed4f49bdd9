/**
 * The one request message of a unary gRPC call, read once into an exactly sized buffer: its
 * size is checked and reserved against the in-flight byte budget as soon as its 5-byte length
 * prefix arrives, the call is admitted on the message's head (HeadAdmission) before the rest
 * is read, and the message is placed so that the tensor bytes the method's alignment probe
 * finds start 8-byte aligned. A compressed message (`grpc-encoding` gzip or deflate) is
 * admitted on what its first bytes inflate to, decompressed against the same budget and
 * placed the same way.
 */
import { constants as zlibConstants, gunzipSync, inflateSync } from 'node:zlib';
import { Code, ServingError } from '@visionserve/protocol';
import { inflateBounded, type InflateFailure } from '../shared/bounded-inflate.js';
import { type InflightBudget, budgetExhausted } from '../shared/inflight-budget.js';
import { type CallState, releaseReservation } from './grpc-call.js';
import type { GrpcMethod } from './grpc-service.js';

/** Bytes of a message's head an alignment probe sees (enough for model spec, dtype and shape). */
const PROBE_BYTES = 1024;
/** Tensor views are placed at this alignment (the largest element size). */
const ALIGNMENT = 8;
/** Most bytes the head of a compressed message may inflate to for its admission. */
const HEAD_INFLATE_BYTES = 64 * 1024;

/** A request message and the ArrayBuffer it was read into (the call's alone). */
export interface ReadMessage {
  readonly message: Uint8Array;
  readonly buffer: ArrayBuffer;
}

export interface MessageLimits {
  /** Largest request message in bytes (RESOURCE_EXHAUSTED above). */
  readonly maxMessageBytes: number;
  /** The in-flight byte budget (UNAVAILABLE when a message does not fit); undefined: none. */
  readonly budget: InflightBudget | undefined;
}

/** Reads the one message of a unary request (rejects with the ServingError to answer). */
export function readUnaryMessage(
  call: CallState,
  method: GrpcMethod,
  limits: MessageLimits,
): Promise<ReadMessage> {
  return new Promise((resolve, reject) => {
    new UnaryMessageReader(call, method, limits, resolve, reject).start();
  });
}

/**
 * An exactly sized message of `length` bytes in a buffer of its own, placed so that the byte
 * at `offset` (the alignment probe's answer; undefined: none) is ALIGNMENT-aligned. The buffer
 * is left uninitialised: `new ArrayBuffer` zero-fills (a 600 KB memset per request for
 * nothing), and the message is about to be overwritten in full; the few alignment bytes before
 * it are never read.
 */
function alignedMessage(length: number, offset: number | undefined): ReadMessage {
  const shift = offset === undefined ? 0 : (ALIGNMENT - (offset % ALIGNMENT)) % ALIGNMENT;
  const buffer = Buffer.allocUnsafeSlow(length + shift).buffer;
  return { message: new Uint8Array(buffer, shift, length), buffer };
}

/**
 * The start of a compressed message, inflated from its first bytes (a cut deflate stream
 * yields what it holds so far), for the head admission; undefined when they cannot be read
 * that way (corrupt, or inflating past HEAD_INFLATE_BYTES): the call is then admitted when
 * its run is submitted, and the decompression answers for a corrupt message.
 */
function inflatedHead(encoding: string | undefined, head: Uint8Array): Uint8Array | undefined {
  const options = { finishFlush: zlibConstants.Z_SYNC_FLUSH, maxOutputLength: HEAD_INFLATE_BYTES };
  try {
    return encoding === 'gzip' ? gunzipSync(head, options) : inflateSync(head, options);
  } catch {
    return undefined;
  }
}

function moreThanOneMessage(): ServingError {
  return new ServingError(Code.UNIMPLEMENTED, 'More than one request message in a unary call');
}

/** The reading of one unary message, from its call's DATA as the transport delivers it. */
class UnaryMessageReader {
  private readonly prefix = new Uint8Array(5);
  private prefixFill = 0;
  /** The message's length from its prefix (-1 until the prefix is whole). */
  private length = -1;
  private compressed = false;
  /** Bytes of the message kept until the alignment probe has seen enough. */
  private head: Buffer[] | undefined = [];
  private headBytes = 0;
  /** The placed message (once the head is seen) and the bytes of it filled so far. */
  private target: Uint8Array | undefined;
  private buffer: ArrayBuffer | undefined;
  private fill = 0;

  constructor(
    private readonly call: CallState,
    private readonly method: GrpcMethod,
    private readonly limits: MessageLimits,
    private readonly resolve: (read: ReadMessage) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  start(): void {
    this.call.stream.read(
      (chunk) => {
        this.onData(chunk);
      },
      () => {
        this.onEnd();
      },
      this.into,
    );
    this.call.controller.signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /** The room left in the placed message: where the transport may read the next bytes. */
  private readonly into = (): Uint8Array | undefined =>
    this.target !== undefined && this.fill < this.length ? this.target.subarray(this.fill) : undefined;

  private onData(chunk: Buffer): void {
    let at = 0;
    if (this.length < 0) {
      const after = this.readPrefix(chunk);
      if (after === undefined) return;
      at = after;
    }
    const rest = at === 0 ? chunk : chunk.subarray(at);
    if (rest.byteLength === 0) {
      if (this.length === 0 && this.target === undefined) this.place();
      return;
    }
    if (this.target === undefined ? !this.keepHead(rest) : !this.fillMessage(rest)) return;
    if (this.target !== undefined && this.fill > this.length) this.fail(moreThanOneMessage());
  }

  /**
   * Takes the length prefix's bytes at the front of `chunk`: the offset of the message bytes
   * after it, or undefined (the prefix is not whole yet, or the message was refused).
   */
  private readPrefix(chunk: Buffer): number | undefined {
    const take = Math.min(5 - this.prefixFill, chunk.byteLength);
    this.prefix.set(chunk.subarray(0, take), this.prefixFill);
    this.prefixFill += take;
    if (this.prefixFill < 5) return undefined;
    const refusal = this.admitPrefix();
    if (refusal === undefined) return take;
    this.fail(refusal);
    return undefined;
  }

  /** Checks the whole prefix (compression flag, length) and reserves the message's bytes; the refusal, if any. */
  private admitPrefix(): ServingError | undefined {
    const { prefix, call } = this;
    if (prefix[0] !== 0 && (prefix[0] !== 1 || call.encoding === undefined)) {
      return new ServingError(
        Code.INTERNAL,
        'Compressed message without a supported grpc-encoding (gzip, deflate)',
      );
    }
    this.compressed = prefix[0] === 1;
    const length = new DataView(prefix.buffer).getUint32(1);
    this.length = length;
    const { maxMessageBytes, budget } = this.limits;
    if (length > maxMessageBytes) {
      return new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Received message larger than max (${length} vs. ${maxMessageBytes})`,
      );
    }
    if (budget === undefined) return undefined;
    call.reservation = budget.tryReserve(length);
    return call.reservation === undefined ? budgetExhausted() : undefined;
  }

  /** Keeps bytes of the head until the probe has enough, then places the message; false when failed. */
  private keepHead(rest: Buffer): boolean {
    // Bytes past the declared length (a second message) must not reach place().
    if (this.headBytes + rest.byteLength > this.length) {
      this.fail(moreThanOneMessage());
      return false;
    }
    this.headBytes += rest.byteLength;
    if (this.headBytes >= Math.min(this.length, PROBE_BYTES)) {
      this.head!.push(rest);
      return this.place();
    }
    // Kept past this call: a copy (the view is only valid during it).
    this.head!.push(Buffer.from(rest));
    return true;
  }

  /** Copies bytes into the placed message (unless the transport read them there); false when failed. */
  private fillMessage(rest: Buffer): boolean {
    const target = this.target!;
    if (this.fill + rest.byteLength > this.length) {
      this.fail(moreThanOneMessage());
      return false;
    }
    // Bytes the transport read straight into place (into) are already there.
    if (rest.buffer !== target.buffer || rest.byteOffset !== target.byteOffset + this.fill) {
      target.set(rest, this.fill);
    }
    this.fill += rest.byteLength;
    return true;
  }

  /** Admits the call on the message's head and places the message; false when refused. */
  private place(): boolean {
    const seen = Buffer.concat(this.head!, this.headBytes);
    this.head = undefined;
    if (!this.admit(seen)) return false;
    // Admitted: the rest of the message may come at full speed.
    this.call.stream.openWindow?.(this.length - seen.byteLength);
    // A compressed message is read as it is and placed once it is decompressed.
    const { message, buffer } = alignedMessage(
      this.length,
      this.compressed ? undefined : this.method.alignment?.(seen),
    );
    this.buffer = buffer;
    this.target = message;
    message.set(seen, 0);
    this.fill = seen.byteLength;
    return true;
  }

  /**
   * The method's admission on the head (HeadAdmission); false when it refused the call. A
   * compressed head is admitted on what it inflates to; one that cannot be read so is not
   * admitted here (its run is, when submitted).
   */
  private admit(seen: Buffer): boolean {
    const { admit } = this.method;
    if (admit === undefined) return true;
    const head = this.compressed ? inflatedHead(this.call.encoding, seen) : seen;
    if (head === undefined) return true;
    const { call } = this;
    try {
      call.release = admit(head, {
        signal: call.controller.signal,
        deadline: call.deadline,
        body: { received: () => this.fill, total: this.length },
      });
      return true;
    } catch (error) {
      this.fail(error instanceof ServingError ? error : new ServingError(Code.INTERNAL, 'Internal error'));
      return false;
    }
  }

  private onEnd(): void {
    this.cleanup();
    const { length } = this;
    if (length >= 0 && this.target === undefined && this.head !== undefined && this.headBytes >= length) {
      if (!this.place()) return;
    }
    if (this.target === undefined || this.fill !== length) {
      this.dropReservation();
      this.reject(new ServingError(Code.INTERNAL, 'Incomplete request message'));
      return;
    }
    if (!this.compressed) {
      this.resolve({ message: this.target, buffer: this.buffer! });
      return;
    }
    decompressMessage(this.call, this.method, this.target, this.limits.maxMessageBytes).then(
      this.resolve,
      this.reject,
    );
  }

  private readonly onAbort = (): void => {
    this.cleanup();
    this.dropReservation();
    this.reject(this.call.controller.signal.reason as ServingError);
  };

  private fail(error: ServingError): void {
    this.cleanup();
    this.dropReservation();
    this.reject(error);
  }

  private cleanup(): void {
    this.call.stream.stopReading();
    this.call.controller.signal.removeEventListener('abort', this.onAbort);
  }

  /**
   * A message abandoned before it was whole: its buffer is garbage and the rest of it is
   * read and dropped, so its bytes leave the in-flight budget now rather than when the
   * client ends the stream (a client that stops sending would hold them until the
   * send-stall timeout).
   */
  private dropReservation(): void {
    releaseReservation(this.call);
  }
}

/**
 * A compressed request message, decompressed into its own buffer and placed for the
 * method's alignment probe like an uncompressed one. Output is counted against the byte
 * budget as it is produced (UNAVAILABLE when the budget runs out) and stops at
 * maxMessageBytes (RESOURCE_EXHAUSTED): a compression bomb costs at most the budget.
 */
async function decompressMessage(
  call: CallState,
  method: GrpcMethod,
  bytes: Uint8Array,
  maxMessageBytes: number,
): Promise<ReadMessage> {
  const encoding = call.encoding === 'gzip' ? 'gzip' : 'deflate';
  const { chunks, total } = await inflateBounded(encoding, bytes, {
    maxBytes: maxMessageBytes,
    grow: call.reservation === undefined ? undefined : (more) => call.reservation!.grow(more),
    fail: (failure) => inflateError(failure, encoding, maxMessageBytes),
  });
  const read = alignedMessage(total, method.alignment?.(Buffer.concat(chunks, Math.min(total, PROBE_BYTES))));
  let at = 0;
  for (const c of chunks) {
    read.message.set(c, at);
    at += c.byteLength;
  }
  return read;
}

/** The status a failed decompression answers. */
function inflateError(failure: InflateFailure, encoding: string, maxMessageBytes: number): ServingError {
  switch (failure.kind) {
    case 'too-large':
      return new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Decompressed message larger than max (${maxMessageBytes})`,
      );
    case 'overloaded':
      return budgetExhausted();
    default:
      return new ServingError(Code.INTERNAL, `Cannot decompress the ${encoding} message: ${failure.message}`);
  }
}
