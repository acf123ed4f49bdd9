import type { Code, FastBodyMessage, FastJsonFormat } from '@visionserve/protocol';

/** A body for a JSON decode thread; `bytes` is the thread's own copy. */
export interface ToDecodeWorker {
  readonly id: number;
  /** Which body this is (readFastJsonBody). */
  readonly format: FastJsonFormat;
  readonly bytes: Uint8Array;
  /**
   * A `tfs-predict` body that the fast reader does not take is parsed here too, by the
   * general path (parseTfsJsonText), instead of being answered `undefined`.
   */
  readonly general?: boolean;
  /**
   * `bytes` views a lent slot of shared memory (JsonDecoder.bodyBuffer): the rest of its
   * buffer after the body is this body's too, and the tensors' values are written there
   * when they fit (the receiver reads them without a transfer), else moved.
   */
  readonly tail?: boolean;
}

/** The answer: the tensors read (undefined: not a body for the fast reader), and the time it took. */
export interface FromDecodeWorker {
  readonly id: number;
  /** Wall-clock ms the read took in the thread. */
  readonly ms: number;
  readonly body: FastBodyMessage | undefined;
  /** The general path's refusal of a `general` body (INVALID_ARGUMENT: not JSON). */
  readonly error?: { readonly code: Code; readonly message: string };
  /** Set when the reader threw (a bug): logged, and the body takes the general path. */
  readonly failure?: string;
}
