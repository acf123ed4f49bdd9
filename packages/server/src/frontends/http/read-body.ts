import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code, ServingError } from '@visionserve/protocol';
import type { ContentEncoding } from './http-api.js';
import { inflateBounded } from '../shared/bounded-inflate.js';
import { budgetExhausted } from '../shared/inflight-budget.js';
import { sendJson } from './send.js';

export interface ReadBodyOptions {
  /** Largest accepted body in bytes, as received (compressed or not). */
  readonly limitBytes: number;
  /** Largest accepted body in bytes after decompression. */
  readonly decompressedLimitBytes: number;
  /** Content-Encodings decoded besides identity. Default `['gzip']`. */
  readonly encodings?: readonly ContentEncoding[] | undefined;
  /** Aborts the read (client gone, deadline). */
  readonly signal?: AbortSignal | undefined;
  /**
   * Admission by memory: asked for the declared length before reading, or for each chunk
   * of an undeclared body, and for each piece of a decompressed body as it is produced; false
   * refuses the request (UNAVAILABLE, reason `overloaded`)
   * without buffering the rest.
   */
  readonly reserve?: ((bytes: number) => boolean) | undefined;
  /**
   * A byte of the body to place at an 8-byte boundary of its buffer (where a binary tensor
   * starts, so that it can be viewed instead of copied). Applies to identity bodies with a
   * declared length. Default: the body starts at offset 0.
   */
  readonly alignAt?: number | undefined;
  /**
   * Memory of the caller's for an identity body with a declared length of `bytes`: the body
   * is read into the view it returns (exactly `bytes` long), which the caller owns and
   * releases; undefined reads it into a buffer of its own. Ignores `alignAt`. Default: none.
   */
  readonly into?: ((bytes: number) => Uint8Array | undefined) | undefined;
}

/** A body over a limit: RESOURCE_EXHAUSTED, answered 413 by the HTTP edge. */
export function bodyTooLarge(message: string): ServingError {
  return new ServingError(Code.RESOURCE_EXHAUSTED, message, { reason: 'body-too-large' });
}

/**
 * Reads a request body into one Buffer whose memory belongs to this request alone (never
 * pooled, never shared with the socket; or the caller's `into` memory): its ArrayBuffer may be handed to core as an owned
 * buffer (moved to a worker) once the caller no longer reads the body. A declared `Content-Length` over the limit is
 * refused before reading; an undeclared (chunked) body is refused as soon as it passes
 * the limit, and the rest is not buffered (the caller answers and closes the connection).
 * A `Content-Encoding` among `encodings` is decompressed with its own cap and against the
 * budget (`reserve`), as it is produced (a bomb stops at the cap: 413, or at the budget: 503);
 * any other encoding than identity is refused with INVALID_ARGUMENT
 * (reason `unsupported-content-encoding`), as is a body that does not decompress.
 */
export async function readBody(req: IncomingMessage, options: ReadBodyOptions): Promise<Buffer> {
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const encodings = options.encodings ?? ['gzip'];
  const decoder =
    encoding === 'identity' || encoding === ''
      ? undefined
      : encodings.find((e): e is ContentEncoding => e === encoding);
  if (encoding !== 'identity' && encoding !== '' && decoder === undefined) {
    throw new ServingError(Code.INVALID_ARGUMENT, `Unsupported Content-Encoding: ${encoding.slice(0, 64)}`, {
      reason: 'unsupported-content-encoding',
    });
  }
  const header = req.headers['content-length'];
  const declared = header === undefined ? undefined : Number(header);
  if (declared !== undefined && declared > options.limitBytes) {
    throw bodyTooLarge(`Request body of ${header} bytes exceeds the limit of ${options.limitBytes} bytes`);
  }
  if (declared !== undefined && options.reserve?.(declared) === false) throw budgetExhausted();
  const raw = await collect(req, options, declared, decoder === undefined);
  if (decoder === undefined) return raw;
  return decompressed(decoder, raw, options);
}

/**
 * A compressed body's content in one buffer of its own. Its decompressed bytes are counted
 * against the request's share of the in-flight budget as they are produced and the stream
 * stops at the limit (bounded-inflate.ts): a bomb costs at most that, and answers 413 (or
 * 503 when the budget ran out first).
 */
async function decompressed(
  decoder: ContentEncoding,
  raw: Buffer,
  options: ReadBodyOptions,
): Promise<Buffer> {
  const limit = options.decompressedLimitBytes;
  const { chunks, total } = await inflateBounded(decoder, raw, {
    maxBytes: limit,
    grow: options.reserve,
    fail: (failure) =>
      failure.kind === 'too-large'
        ? bodyTooLarge(`Decompressed request body exceeds the limit of ${limit} bytes`)
        : failure.kind === 'overloaded'
          ? budgetExhausted()
          : new ServingError(
              Code.INVALID_ARGUMENT,
              `Unable to decompress ${decoder} request body: ${failure.message}`,
            ),
  });
  const body = Buffer.allocUnsafeSlow(total);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.byteLength;
  }
  return body;
}

/**
 * The body as received. With a declared length the chunks are copied into one exactly
 * sized buffer as they arrive (no concatenation, no pooled memory; the caller's `into`
 * memory for an `identity` body when it lends some); otherwise they are collected and
 * joined once.
 */
function collect(
  req: IncomingMessage,
  options: ReadBodyOptions,
  declared: number | undefined,
  identity: boolean,
): Promise<Buffer> {
  const { limitBytes: limit, signal, reserve } = options;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let whole: Buffer | undefined;
    if (declared !== undefined && Number.isSafeInteger(declared)) {
      const lent = identity ? options.into?.(declared) : undefined;
      if (lent !== undefined) {
        whole = Buffer.from(lent.buffer, lent.byteOffset, lent.byteLength);
      } else {
        const at = options.alignAt;
        const shift = at === undefined || at < 0 || at > declared ? 0 : (8 - (at % 8)) % 8;
        whole = Buffer.allocUnsafeSlow(declared + shift).subarray(shift);
      }
    }
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
      signal?.removeEventListener('abort', onAbort);
    };
    const fail = (error: unknown): void => {
      cleanup();
      // Keep reading into the void so the socket does not stall; nothing is kept.
      req.resume();
      reject(error instanceof Error ? error : new Error(String(error)));
    };
    const onData = (chunk: Buffer): void => {
      if (size + chunk.byteLength > limit) {
        chunks.length = 0;
        fail(bodyTooLarge(`Request body exceeds the limit of ${limit} bytes`));
        return;
      }
      if (whole !== undefined) {
        if (size + chunk.byteLength > whole.byteLength) {
          fail(new ServingError(Code.INVALID_ARGUMENT, 'Request body is longer than its Content-Length'));
          return;
        }
        copyInto(whole, chunk, size);
      } else {
        if (reserve?.(chunk.byteLength) === false) {
          chunks.length = 0;
          fail(budgetExhausted());
          return;
        }
        chunks.push(chunk);
      }
      size += chunk.byteLength;
    };
    const onEnd = (): void => {
      cleanup();
      if (whole !== undefined) {
        if (size !== whole.byteLength) {
          reject(new ServingError(Code.INVALID_ARGUMENT, 'Request body is shorter than its Content-Length'));
        } else resolve(whole);
        return;
      }
      // Always a copy: a chunk's memory may be shared with the socket's reads.
      const body = Buffer.allocUnsafeSlow(size);
      let at = 0;
      for (const chunk of chunks) {
        body.set(chunk, at);
        at += chunk.byteLength;
      }
      resolve(body);
    };
    const onError = (error: Error): void => {
      fail(new ServingError(Code.CANCELLED, `Error reading request body: ${error.message}`));
    };
    const onAborted = (): void => {
      fail(new ServingError(Code.CANCELLED, 'Client closed the connection while sending the body'));
    };
    const onAbort = (): void => {
      fail(signal?.reason ?? new ServingError(Code.CANCELLED, 'Request aborted'));
    };
    if (signal?.aborted) {
      onAbort();
      return;
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Bounce buffer of copyInto: one chunk piece at any offset modulo 8. */
const BOUNCE = new Uint8Array(65_536 + 8);

/**
 * target.set(chunk, at). V8 copies into shared memory word by word only where source and
 * target addresses agree modulo 8, else byte by byte (measured: 1.3 ms instead of 0.14 ms
 * per 1.6 MB of socket chunks); such chunks go through BOUNCE, placed so that they agree.
 */
function copyInto(target: Buffer, chunk: Buffer, at: number): void {
  const shift = (target.byteOffset + at) % 8;
  if (!(target.buffer instanceof SharedArrayBuffer) || chunk.byteOffset % 8 === shift) {
    target.set(chunk, at);
    return;
  }
  for (let done = 0; done < chunk.byteLength; done += BOUNCE.byteLength - 8) {
    const piece = chunk.subarray(done, done + BOUNCE.byteLength - 8);
    BOUNCE.set(piece, shift);
    target.set(BOUNCE.subarray(shift, shift + piece.byteLength), at + done);
  }
}

/** How long a client may keep uploading after a 413 before its connection is dropped, in ms. */
const LINGER_MS = 2_000;

/**
 * Answers 413 without closing the socket under the client's feet. Closing with
 * unread upload bytes makes the kernel reset the connection, and the client may
 * lose the 413 it has not read yet (seen with a 200 MB upload). Instead the
 * response keeps the connection, node discards the rest of the body, and a client
 * that is still uploading after LINGER_MS loses the connection (nginx calls this
 * a lingering close).
 */
export function sendBodyTooLarge(req: IncomingMessage, res: ServerResponse, message: string): void {
  // Not sendJsonError: its Connection: close for an unread body is what lingering avoids.
  sendJson(res, 413, JSON.stringify({ error: message }));
  if (req.complete) return;
  req.resume();
  const timer = setTimeout(() => {
    req.socket.destroy();
  }, LINGER_MS);
  timer.unref();
  const done = (): void => {
    clearTimeout(timer);
  };
  req.once('end', done);
  req.socket.once('close', done);
}
