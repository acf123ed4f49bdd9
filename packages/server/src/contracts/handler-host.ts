import { type Tensor } from '@visionserve/protocol';

/**
 * Contract between a frontend that serves user pre/post-processing code (the
 * SageMaker-style endpoint's `code/inference.js`) and the runtime that hosts it in
 * worker threads, off the main event loop. Type-only: the composition root passes
 * the runtime's implementation to the frontend.
 */

/** Request facts handed to user code as `context` (serialisable). */
export interface HandlerContextData {
  readonly modelName: string;
  /** `tfs-model-version`, when the request named one. */
  readonly modelVersion: string | undefined;
  /** `tfs-method`: "predict" (default), "classify" or "regress". */
  readonly method: string;
  /** TF Serving REST URL of this model and method, e.g. http://127.0.0.1:8501/v1/models/m:predict; undefined when REST is off. */
  readonly restUri: string | undefined;
  /** TF Serving gRPC port on the loopback address; undefined when gRPC is off. */
  readonly grpcPort: number | undefined;
  /** The raw `X-Amzn-SageMaker-Custom-Attributes` header ("" when absent). */
  readonly customAttributes: string;
  /** Request Content-Type (default "application/json"). */
  readonly requestContentType: string;
  /** Request Accept (default "application/json"). */
  readonly acceptHeader: string;
  /** Request body length in bytes. */
  readonly contentLength: number;
}

/** What user code may ask of `context.predict`. */
export interface HandlerPredictOptions {
  /** Another model than the request's. */
  readonly modelName?: string | undefined;
  /** A version; default the request's version, else the latest. */
  readonly modelVersion?: number | undefined;
  /** Output aliases to compute; all when omitted. */
  readonly outputFilter?: readonly string[] | undefined;
}

/** The model server's answer to an input handler's request body (TF Serving REST semantics). */
export interface ModelServerResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

/** Main-thread services a running handler calls back into. */
export interface HandlerBridge {
  /** In-process predict; tensors cross threads as transferred buffers. */
  predict(
    inputs: Record<string, Tensor>,
    options: HandlerPredictOptions,
    signal: AbortSignal | undefined,
  ): Promise<Record<string, Tensor>>;
  /**
   * The step between `inputHandler` and `outputHandler`: runs a TF Serving REST
   * request body (JSON) against the request's model and method. Never rejects:
   * errors come back as `{status, body: {"error": ...}}`, as TF Serving answers.
   */
  modelServer(body: Uint8Array, signal: AbortSignal | undefined): Promise<ModelServerResponse>;
}

export interface HandlerInvocation {
  /** Real path of the handler module, already confined to its model directory. */
  readonly modulePath: string;
  /** Request body; ownership passes to the host (its buffer may be transferred). */
  readonly body: Uint8Array;
  readonly context: HandlerContextData;
}

export interface HandlerResult {
  readonly body: Uint8Array;
  readonly contentType: string;
}

/**
 * Runs user handler modules. Errors are ServingErrors: INTERNAL carrying the
 * handler's own message for a throwing handler or a module that cannot be loaded
 * or exports no handler; DEADLINE_EXCEEDED / CANCELLED on abort; UNAVAILABLE after
 * close.
 */
export interface HandlerHost {
  invoke(
    invocation: HandlerInvocation,
    bridge: HandlerBridge,
    signal: AbortSignal | undefined,
  ): Promise<HandlerResult>;
  /**
   * Forgets modules loaded from under `directory` (a model was unloaded or
   * replaced): the worker threads that loaded them are retired once idle, so the
   * next invocation imports the module afresh.
   */
  forget(directory: string): void;
  /** Terminates every worker; in-flight invocations fail with UNAVAILABLE. */
  close(): Promise<void>;
}
