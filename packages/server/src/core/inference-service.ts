import type { Tensor } from '@visionserve/protocol';
import type { ModelConfig } from './model-config.js';
import type { VersionStatus } from './model-state.js';
import type { Signature } from './signature.js';
import type { OutputLease } from './session.js';

/** Addresses a model: by name, optionally pinned to a version or a label (never both). */
export interface ModelSpec {
  readonly name: string;
  readonly version?: number | undefined;
  readonly label?: string | undefined;
  /** Defaults to "serving_default". */
  readonly signatureName?: string | undefined;
}

export interface PredictRequest {
  readonly model: ModelSpec;
  /** Alias -> tensor. Ownership passes to the service. */
  readonly inputs: Readonly<Record<string, Tensor>>;
  /** Output aliases to return; all when empty or omitted. */
  readonly outputFilter?: readonly string[] | undefined;
  /** Whole buffers handed over with the inputs (see ServablePredictRequest.ownedBuffers). */
  readonly ownedBuffers?: readonly ArrayBuffer[] | undefined;
  /** Outputs may live in pooled memory until this lease is released (see RunOptions.lease). */
  readonly outputLease?: OutputLease | undefined;
}

export interface ResolvedModel {
  readonly name: string;
  readonly version: number;
  readonly signatureName: string;
}

export interface PredictResponse {
  readonly model: ResolvedModel;
  readonly outputs: Record<string, Tensor>;
}

/** A request body on its way, as its transport sees it (for admission: see Servable.admit). */
export interface BodyArrival {
  /** Bytes of the body received so far. */
  received(): number;
  /** The body's length when declared (Content-Length, the gRPC length prefix); undefined when not. */
  readonly total: number | undefined;
  /**
   * True once the whole body is in and waits to be decoded (a JSON body queued for a decode
   * thread): it is work that exists, and counts as queued model work until the release.
   */
  decoding?(): boolean;
}

export interface CallOptions {
  /** Deadline / client cancellation. */
  readonly signal?: AbortSignal | undefined;
  /**
   * When the caller stops waiting (Date.now() clock, ms). A request that the queue in front
   * of its model cannot start before then is refused at once (UNAVAILABLE) instead of
   * occupying the queue. The signal still enforces it.
   */
  readonly deadline?: number | undefined;
  /**
   * process.hrtime.bigint() when the request arrived (its body read), for the statistics:
   * success and fail durations and compute_input start here. Default: when the core call
   * started; a `Servable.predict` may name a later one (a scope opened before the body arrived).
   */
  readonly arrivedAt?: bigint | undefined;
}

/** A predict against one pinned version. */
export interface ServablePredictRequest {
  /** Alias -> tensor. Ownership passes to the servable. */
  readonly inputs: Readonly<Record<string, Tensor>>;
  /** Output aliases to return; all when empty or omitted. */
  readonly outputFilter?: readonly string[] | undefined;
  /** "" and undefined mean "serving_default", as in TF Serving. */
  readonly signatureName?: string | undefined;
  /**
   * Whole buffers the caller hands over with the inputs (e.g. the request message a
   * transport read the tensors' bytes into): inputs that are views into one of them are
   * moved to the runtime with it instead of copied. The caller must not touch them again.
   */
  readonly ownedBuffers?: readonly ArrayBuffer[] | undefined;
  /** Outputs may live in pooled memory until this lease is released (see RunOptions.lease). */
  readonly outputLease?: OutputLease | undefined;
  /**
   * The inputs are the model's own (`Signature.modelInputs`) rather than what clients
   * send to an adapted signature (e.g. Classify builds feature tensors from tf.Examples
   * itself). Default false.
   */
  readonly modelInputs?: boolean | undefined;
}

/**
 * One model version, pinned for the duration of a `withServable` call: everything a
 * frontend needs to decode a request (signatures, assets) and to run it.
 */
export interface Servable<A> {
  readonly name: string;
  readonly version: number;
  /**
   * Signature name -> signature, as clients see them: the session's signatures plus those
   * derived from the version's assets (e.g. an encoded-image signature).
   */
  readonly signatures: Readonly<Record<string, Signature>>;
  /** Signatures of the model's format that are not served, with the reason (partial load). */
  readonly unservedSignatures?: Readonly<Record<string, string>> | undefined;
  /** The assets the version was loaded with (labels, image settings, handler module). */
  readonly assets: A;
  /**
   * The signature a request names ("" and undefined: serving_default); FAILED_PRECONDITION
   * `Serving signature key "x" not found.` otherwise, as TF Serving answers.
   */
  signature(name?: string): { readonly name: string; readonly signature: Signature };
  /**
   * Admission before the request body is read, on this pinned version: throws UNAVAILABLE
   * (reason `overloaded`) when its queue is full or the request could not finish before its
   * deadline (or, with a queue-wait limit, would wait longer than it allows beyond the
   * burst every instance queues). Cheap. With `body`, the request counts as queued work
   * while its body arrives at the policy's minimum rate (a trickling one does not), until
   * the returned release is called: call it once the body is in or the request ended.
   */
  admit(options?: CallOptions, body?: BodyArrival): () => void;
  /**
   * Validates the inputs and output filter against the signature (INVALID_ARGUMENT naming
   * the problem), runs the version and returns the outputs by alias. Rejects with the
   * abort reason as soon as the call's signal fires (the run itself finishes in the
   * background; the version is released only after it has).
   */
  predict(request: ServablePredictRequest, options?: CallOptions): Promise<Record<string, Tensor>>;
}

/**
 * The in-process inference API every frontend calls: one scoped call per request.
 * Errors are ServingErrors: NOT_FOUND for unknown models/versions, INVALID_ARGUMENT
 * for bad inputs or labels, FAILED_PRECONDITION for an unknown signature, UNAVAILABLE
 * while shutting down, CANCELLED / DEADLINE_EXCEEDED on abort. Anything else a
 * callback throws is logged and becomes INTERNAL "Internal error".
 */
export interface InferenceService<A = unknown> {
  /**
   * Acquires the version a spec names once, hands it to `fn` and releases it when `fn`
   * has settled and every run it started has finished, so decoding, running and
   * encoding all see the same version even while versions are swapped.
   */
  withServable<T>(
    spec: ModelSpec,
    fn: (servable: Servable<A>) => Promise<T>,
    options?: CallOptions,
  ): Promise<T>;
  /** `withServable` + `predict` on the spec's signature: the whole request for binary protocols. */
  predict(request: PredictRequest, options?: CallOptions): Promise<PredictResponse>;
  /**
   * `Servable.admit` on the version the spec names, for transports that admit a request
   * before they pin its version (gRPC, on the first bytes of the message): NOT_FOUND for an
   * unknown model or version, so a body that cannot be served is never read. Cheap.
   */
  admit(spec: ModelSpec, options?: CallOptions, body?: BodyArrival): () => void;
  /** Status of all versions of a model, or of one version/label. */
  status(model: ModelSpec): VersionStatus[];
  /** Replaces the whole served model set (models absent from `configs` are unloaded). */
  reloadConfig(configs: readonly ModelConfig[]): Promise<void>;
  /** Names of the configured models, in config order. */
  modelNames(): string[];
}
