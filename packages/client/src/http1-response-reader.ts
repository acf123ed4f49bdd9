/**
 * An incremental HTTP/1.1 response reader (RFC 9112) for the client's own connections
 * (http1-transport.ts). It is fed the bytes of one response as they arrive and keeps a copy
 * of nothing it does not return: the head is copied out of the read buffer, a body of known
 * length is read into one buffer of exactly its size, and the connection may read the
 * socket straight into that buffer (`room()` / `advance()`), so a large body costs one copy
 * (the kernel's) and no per-read allocation.
 *
 * Framing: 1xx interim responses are skipped; HEAD, 204 and 304 have no body; a final
 * `chunked` transfer coding is decoded (extensions and trailers read and ignored); else a
 * Content-Length; else the body runs to the end of the connection. Anything that does not
 * follow the grammar is UNAVAILABLE ("Malformed HTTP response: ..."): the answer cannot be
 * trusted and the connection is not reused. A body over the limit is RESOURCE_EXHAUSTED.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Code, ServingError } from '@visionserve/protocol';

export interface Http1ResponseLimits {
  /** Largest status line plus header section, bytes. */
  readonly maxHeadBytes: number;
  /** Largest body, bytes (after chunked decoding). */
  readonly maxBodyBytes: number;
}

/** A whole response. */
export interface Http1Response {
  readonly status: number;
  /**
   * Names in lower case; repeated fields joined with ", ", except set-cookie (a list) and the
   * fields node:http keeps the first of. An object without a prototype.
   */
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The connection may carry another request. */
  readonly keepAlive: boolean;
}

/** Status line plus header section, default limit (node:http's is 16 KiB). */
export const DEFAULT_MAX_HEAD_BYTES = 64 * 1024;

/** Longest chunk-size line (size, extensions) read before giving up. */
const MAX_CHUNK_LINE_BYTES = 4096;

const enum State {
  Head,
  Body,
  ChunkLine,
  ChunkData,
  ChunkDataEnd,
  Trailers,
  UntilClose,
  Done,
}

/** An HTTP token (RFC 9110 5.6.2): what a field name must be. */
export const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: [^\r\n]*)?$/;
const CHUNK_LINE = /^([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?$/;

const EMPTY = Buffer.alloc(0);

/**
 * Fields node:http keeps the first of when repeated (its IncomingMessage rule), so that
 * callers see the same headers as before.
 */
const SINGLE_VALUED: ReadonlySet<string> = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/** Strips spaces and tabs at both ends (a loop: a regex here backtracks on long runs). */
function trimWhitespace(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s.charCodeAt(start) === 0x20 || s.charCodeAt(start) === 0x09)) start++;
  while (end > start && (s.charCodeAt(end - 1) === 0x20 || s.charCodeAt(end - 1) === 0x09)) end--;
  return s.slice(start, end);
}

/** A comma-separated header's entries, trimmed and in lower case. */
function tokens(value: string | string[] | undefined): string[] {
  return value === undefined ? [] : String(value).toLowerCase().split(',').map(trimWhitespace);
}

function malformed(what: string): ServingError {
  return new ServingError(Code.UNAVAILABLE, `Malformed HTTP response: ${what}`);
}

export class Http1ResponseReader {
  private state = State.Head;
  /** The head's last bytes so far (up to 3), where its terminator may begin. */
  private headTail: Buffer = EMPTY;
  /** Bytes of the head (or chunk line, or trailers) not yet ended by their terminator. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private keepAlive = false;
  /** Known-length body and how much of it has arrived. */
  private body: Buffer | undefined;
  private filled = 0;
  /** Chunked or close-delimited body pieces (copies). */
  private pieces: Buffer[] = [];
  private pieceBytes = 0;
  private chunkLeft = 0;
  private trailerBytes = 0;
  /** Any byte of the response has arrived. */
  received = false;

  constructor(
    private readonly method: string,
    private readonly limits: Http1ResponseLimits,
    /** Where a known-length body starts in its buffer, in [0, 8), given the headers. */
    private readonly bodyPadding?: (headers: IncomingHttpHeaders) => number,
  ) {}

  get done(): boolean {
    return this.state === State.Done;
  }

  /** The unread rest of a known-length body, for the socket to read straight into; else undefined. */
  room(): Uint8Array | undefined {
    return this.state === State.Body ? this.body!.subarray(this.filled) : undefined;
  }

  /** `n` bytes were read into `room()`. Returns whether the response is complete. */
  advance(n: number): boolean {
    if (this.state !== State.Body || n > this.body!.length - this.filled)
      throw new Error('advance past room()');
    this.received = true;
    this.filled += n;
    if (this.filled === this.body!.length) this.state = State.Done;
    return this.done;
  }

  /**
   * Takes bytes read elsewhere (they may be overwritten once this returns). Returns how many
   * belong to this response: fewer than given only once it is complete (the rest is bytes the
   * server sent after it).
   */
  push(bytes: Uint8Array): number {
    let at = 0;
    if (bytes.length > 0) this.received = true;
    while (at < bytes.length && this.state !== State.Done) {
      switch (this.state) {
        case State.Head:
          at = this.readHead(bytes, at);
          break;
        case State.Body: {
          const n = Math.min(bytes.length - at, this.body!.length - this.filled);
          this.body!.set(bytes.subarray(at, at + n), this.filled);
          this.filled += n;
          at += n;
          if (this.filled === this.body!.length) this.state = State.Done;
          break;
        }
        case State.ChunkLine:
          at = this.readLine(bytes, at, MAX_CHUNK_LINE_BYTES, 'chunk size line', (line) => {
            this.chunkLine(line);
          });
          break;
        case State.ChunkData: {
          const n = Math.min(bytes.length - at, this.chunkLeft);
          this.keepPiece(bytes.subarray(at, at + n));
          this.chunkLeft -= n;
          at += n;
          if (this.chunkLeft === 0) this.state = State.ChunkDataEnd;
          break;
        }
        case State.ChunkDataEnd:
          at = this.readLine(bytes, at, 2, 'chunk data end', (line) => {
            if (line.length !== 0) throw malformed('chunk data longer than its size');
            this.state = State.ChunkLine;
          });
          break;
        case State.Trailers: {
          const from = at;
          at = this.readLine(bytes, at, this.limits.maxHeadBytes, 'trailer section', (line) => {
            if (line.length === 0) this.state = State.Done;
          });
          this.trailerBytes += at - from;
          if (this.trailerBytes > this.limits.maxHeadBytes) throw malformed('trailer section too long');
          break;
        }
        case State.UntilClose:
          this.keepPiece(bytes.subarray(at));
          at = bytes.length;
          break;
      }
    }
    return at;
  }

  /** The connection ended. Completes a body that runs to the end; else the response is cut short. */
  end(): void {
    if (this.state === State.UntilClose) {
      this.state = State.Done;
      return;
    }
    if (this.state === State.Done) return;
    if (this.state === State.Body) {
      throw new ServingError(
        Code.UNAVAILABLE,
        `Response ended after ${this.filled} of ${this.body!.length} bytes`,
      );
    }
    throw new ServingError(
      Code.UNAVAILABLE,
      this.received
        ? 'Connection closed in the middle of the response'
        : 'Connection closed before a response',
    );
  }

  /** The complete response. */
  response(): Http1Response {
    if (this.state !== State.Done) throw new Error('response() before the response is complete');
    const body =
      this.body ?? (this.pieces.length === 1 ? this.pieces[0]! : Buffer.concat(this.pieces, this.pieceBytes));
    return { status: this.status, headers: this.headers, body, keepAlive: this.keepAlive };
  }

  /** RESOURCE_EXHAUSTED when `more` bytes would take a chunked or close-delimited body past the limit. */
  private checkBodyRoom(more: number): void {
    if (this.pieceBytes + more > this.limits.maxBodyBytes) {
      throw new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Response body exceeds the limit of ${this.limits.maxBodyBytes} bytes`,
      );
    }
  }

  private keepPiece(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.checkBodyRoom(bytes.length);
    this.pieces.push(Buffer.from(bytes));
    this.pieceBytes += bytes.length;
  }

  /**
   * Collects bytes up to the next CRLF (at most `max` before it) and hands the line, without
   * its CRLF, to `onLine`. Returns the offset after what it consumed.
   */
  private readLine(
    bytes: Uint8Array,
    at: number,
    max: number,
    what: string,
    onLine: (line: string) => void,
  ): number {
    const lf = bytes.indexOf(0x0a, at);
    const end = lf === -1 ? bytes.length : lf + 1;
    if (this.pendingBytes + (end - at) > max + 2) throw malformed(`${what} too long`);
    if (lf === -1) {
      this.pending.push(Buffer.from(bytes.subarray(at)));
      this.pendingBytes += bytes.length - at;
      return bytes.length;
    }
    const piece = bytes.subarray(at, end);
    const whole = this.pendingBytes === 0 ? piece : Buffer.concat([...this.pending, piece]);
    this.pending = [];
    this.pendingBytes = 0;
    if (whole.length < 2 || whole[whole.length - 2] !== 0x0d) throw malformed(`${what} not ended by CRLF`);
    onLine(Buffer.from(whole.buffer, whole.byteOffset, whole.length - 2).toString('latin1'));
    return end;
  }

  private chunkLine(line: string): void {
    const m = CHUNK_LINE.exec(line);
    if (m === null) throw malformed('bad chunk size line');
    const size = parseInt(m[1]!, 16);
    if (size === 0) {
      this.state = State.Trailers;
      return;
    }
    this.checkBodyRoom(size);
    this.chunkLeft = size;
    this.state = State.ChunkData;
  }

  /** Reads the status line and header section (up to the empty line), then chooses the framing. */
  private readHead(bytes: Uint8Array, at: number): number {
    const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    // The head ends at CRLF CRLF, which may straddle reads: look across the last bytes kept.
    const tail = this.headTail;
    let end = -1;
    if (tail.length > 0) {
      const i = Buffer.concat([tail, view.subarray(at, at + 3)]).indexOf('\r\n\r\n');
      if (i !== -1) end = at + i + 4 - tail.length;
    }
    if (end === -1) {
      const i = view.indexOf('\r\n\r\n', at);
      if (i !== -1) end = i + 4;
    }
    const stop = end === -1 ? bytes.length : end;
    for (let lf = view.indexOf(0x0a, at); lf !== -1 && lf < stop; lf = view.indexOf(0x0a, lf + 1)) {
      const before = lf > at ? view[lf - 1] : tail[tail.length - 1];
      if (before !== 0x0d) throw malformed('a line of the head not ended by CRLF');
    }
    if (this.pendingBytes + stop - at > this.limits.maxHeadBytes) {
      throw malformed(`header section larger than ${this.limits.maxHeadBytes} bytes`);
    }
    const piece = Buffer.from(view.subarray(at, stop));
    this.pending.push(piece);
    this.pendingBytes += piece.length;
    this.headTail = Buffer.concat([tail, piece]).subarray(-3);
    if (end === -1) return bytes.length;
    const head = Buffer.concat(this.pending, this.pendingBytes).toString('latin1');
    this.pending = [];
    this.pendingBytes = 0;
    this.headTail = EMPTY;
    this.parseHead(head.slice(0, -4));
    return end;
  }

  private parseHead(head: string): void {
    const lines = head.split('\r\n');
    const statusLine = STATUS_LINE.exec(lines[0]!);
    if (statusLine === null) throw malformed(`bad status line ${JSON.stringify(lines[0]!.slice(0, 64))}`);
    const minor = Number(statusLine[1]);
    const status = Number(statusLine[2]);
    const headers = Object.create(null) as Record<string, string | string[]>;
    const lengths: string[] = [];
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      const name = colon <= 0 ? '' : line.slice(0, colon);
      if (!HTTP_TOKEN.test(name)) throw malformed(`bad header line ${JSON.stringify(line.slice(0, 64))}`);
      const value = trimWhitespace(line.slice(colon + 1));
      if (/[\0-\x08\x0a-\x1f\x7f]/.test(value)) throw malformed(`bad value of header ${name}`);
      const key = name.toLowerCase();
      if (key === 'content-length') lengths.push(...value.split(',').map(trimWhitespace));
      const seen = headers[key];
      if (key === 'set-cookie') headers[key] = [...((seen as string[] | undefined) ?? []), value];
      else if (seen === undefined) headers[key] = value;
      else if (!SINGLE_VALUED.has(key)) headers[key] = `${seen as string}, ${value}`;
    }
    if (status >= 100 && status < 200) {
      if (status === 101) throw malformed('unexpected 101 Switching Protocols');
      return; // interim: the final response follows
    }
    if (status < 200) throw malformed(`status ${status}`);
    this.status = status;
    this.headers = headers;
    const connection = tokens(headers['connection']);
    this.keepAlive = minor === 1 ? !connection.includes('close') : connection.includes('keep-alive');
    this.chooseFraming(status, headers, lengths);
  }

  private chooseFraming(status: number, headers: Record<string, string | string[]>, lengths: string[]): void {
    if (this.method === 'HEAD' || status === 204 || status === 304) {
      this.startKnownBody(0);
      return;
    }
    const coding = headers['transfer-encoding'];
    if (coding !== undefined) {
      const codings = String(coding)
        .toLowerCase()
        .split(/[ \t]*,[ \t]*/);
      if (codings[codings.length - 1] !== 'chunked') {
        // Not chunked last: the body runs to the end of the connection (RFC 9112 6.3).
        this.keepAlive = false;
        this.state = State.UntilClose;
        return;
      }
      if (codings.length > 1) throw malformed(`unsupported transfer coding ${String(coding)}`);
      // With a Content-Length as well the message is suspect: read it, then drop the connection.
      if (lengths.length > 0) this.keepAlive = false;
      this.state = State.ChunkLine;
      return;
    }
    if (lengths.length > 0) {
      if (!lengths.every((v) => /^\d{1,15}$/.test(v) && v === lengths[0])) {
        throw malformed(`bad Content-Length ${JSON.stringify(lengths.join(', ').slice(0, 64))}`);
      }
      const n = Number(lengths[0]);
      if (n > this.limits.maxBodyBytes) {
        throw new ServingError(
          Code.RESOURCE_EXHAUSTED,
          `Response of ${n} bytes exceeds the limit of ${this.limits.maxBodyBytes}`,
        );
      }
      this.startKnownBody(n);
      return;
    }
    this.keepAlive = false;
    this.state = State.UntilClose;
  }

  private startKnownBody(n: number): void {
    if (this.bodyPadding === undefined) {
      this.body = Buffer.allocUnsafe(n);
    } else {
      // Not from Buffer's shared pool: the caller's tensors may be views of it.
      const pad = this.bodyPadding(this.headers) & 7;
      this.body = Buffer.from(Buffer.allocUnsafeSlow(pad + n).buffer, pad, n);
    }
    this.filled = 0;
    this.state = n === 0 ? State.Done : State.Body;
  }
}
