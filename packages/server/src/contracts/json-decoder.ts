import type { FastJsonFormat, NumericPredictBody } from '@visionserve/protocol';

/**
 * Contract between the frontends that read JSON tensor bodies (TF Serving REST `:predict`,
 * SageMaker `/invocations`, KServe v2 `/infer`) and the runtime that reads them off the
 * event loop, in threads. Type-only: the composition root passes the runtime's implementation.
 */

/** One admitted body's share of the decode backlog; released when its decode ends or its request does. */
export interface DecodeTicket {
  /** The request's signal (admit's `call`): a body still waiting for a thread when it aborts is dropped. */
  readonly signal?: AbortSignal | undefined;
  release(): void;
}

/** Memory lent for one request body (see JsonDecoder.bodyBuffer). */
export interface LentBody {
  /** Exactly the body's length; its contents are the previous user's until the body is read in. */
  readonly bytes: Uint8Array;
  /**
   * Gives the memory back (idempotent); nothing may read `bytes` afterwards. Handlers release
   * in `finally`: a request aborted while its run still waits (admission, queue) may then run
   * on bytes of a later body. Only that abandoned request's result, which nobody reads, can be
   * wrong; a run in progress has already copied its inputs to the worker.
   */
  release(): void;
}

/**
 * JSON tensor bodies read off the event loop. Reading 1.6 MB of JSON numbers
 * costs ~15–30 ms of CPU; done on the main thread, every other request (refusals
 * included) waits behind it, and under overload the loop falls seconds behind. Here big
 * bodies go to decode threads (`threads`, started on first use) and the event loop only
 * moves bytes; the tensors come back as transferred arrays.
 *
 * Admission: the bodies admitted (arrived) and not yet decoded form a backlog, estimated in
 * ms from the measured decode speed; a request whose body would wait longer than
 * `maxWaitMs` is refused before its body is read (UNAVAILABLE, reason `overloaded`: HTTP 503).
 */
export interface JsonDecoder {
  /**
   * Throws UNAVAILABLE (reason `overloaded`) when a body of `bytes` (its declared length)
   * would make the decode backlog longer than `maxWaitMs` (beyond the burst every thread
   * takes): the check at the headers, which joins nothing, so a body still arriving is not
   * counted as decode work.
   */
  check(bytes: number): void;
  /**
   * Admits a body of `bytes` into the decode backlog (once it has arrived), or throws as
   * `check` does. `call.signal`: the request's; a read with this ticket whose body still
   * waits for a decode thread when it aborts (deadline, client gone) rejects with its reason
   * at once.
   */
  admit(bytes: number, call?: { readonly signal?: AbortSignal | undefined }): DecodeTicket;
  /**
   * Memory to read a body of `bytes` bytes (its declared length) into, which the decode
   * threads read without a copy (reused shared memory); undefined when such a body is read
   * on the event loop or no memory is free (the caller reads it into a buffer of its own).
   * The caller releases it once nothing reads the body or what was read from it any more:
   * after its decode settled and the request's handler is done with the result.
   */
  bodyBuffer(bytes: number): LentBody | undefined;
  /**
   * The fast numeric reader's result for `bytes` (readNumericPredictBody): on a decode
   * thread for bodies of `minBytes` or more, here otherwise; undefined when the reader does
   * not take the body (the caller parses it with the general path). Releases `ticket`.
   */
  readNumericPredictBody(bytes: Uint8Array, ticket?: DecodeTicket): Promise<NumericPredictBody | undefined>;
  /**
   * A TF Serving predict body as parseTfsPredictJson (`@visionserve/protocol`) gives it:
   * the fast reader's, or else the general path's (JSON.parse with NaN/Infinity tokens),
   * both read on a decode thread for bodies of `minBytes` or more and here otherwise. Rejects
   * with its INVALID_ARGUMENT for text that is not JSON. Releases `ticket`.
   */
  readTfsPredictBody(bytes: Uint8Array, ticket?: DecodeTicket): Promise<unknown>;
  /**
   * readFastJsonBody(format, bytes) (`@visionserve/protocol`), placed and admitted as
   * readNumericPredictBody: undefined when the reader does not take the body. Releases `ticket`.
   */
  read(format: FastJsonFormat, bytes: Uint8Array, ticket?: DecodeTicket): Promise<unknown>;
  /** Estimated ms before a body admitted now would be decoded. */
  backlogMs(): number;
  /** Bodies read on a decode thread / on the event loop since start. */
  readonly counts: { readonly offThread: number; readonly inline: number };
}
