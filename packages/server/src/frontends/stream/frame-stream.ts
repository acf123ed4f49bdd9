/**
 * Frame streams for live video, without a transport: a client sends encoded frames (JPEG,
 * PNG, WebP) or raw tensors one after the other and gets, for each processed frame, what
 * `/invocations` answers for that image, in frame order. The WebSocket route and the gRPC
 * method both drive a FrameStream through a FrameSink.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Code, ServingError, type Tensor, invalidArgument, toServingError } from '@visionserve/protocol';
import { type Tracker, type TrackerConfig, createTracker, trackInvocationAnswer } from '@visionserve/vision';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { CallOptions, InferenceService, ModelSpec, Servable } from '../../core/inference-service.js';
import type { Logger } from '../../util/logger.js';
import type { ConcurrencyLimit } from '../shared/concurrency-limit.js';
import { runImageInvocation, runTensorInvocation } from '../shared/image-invocation.js';
import type { RequestObserver } from '../shared/request-observer.js';
import { type FrameStreamCounts, FrameStreamTally } from './frame-stream-counts.js';

/** `latest`: process the newest frame, drop stale ones; `all`: every frame, pushing back on the client. */
export type FramePolicy = 'latest' | 'all';

export const FRAME_POLICIES: readonly FramePolicy[] = ['latest', 'all'];

export interface FrameStreamLimits {
  /** Streams open at once, all transports (`--stream_max_open`). */
  readonly maxOpen: number;
  /** Largest encoded frame in bytes (`--stream_max_frame_bytes`). */
  readonly maxFrameBytes: number;
  /** Frames waiting per stream with `all` before the transport stops reading (`--stream_queue_frames`). */
  readonly queueFrames: number;
  /** Frames of one stream decoded or run at once (`--stream_inflight_frames`). */
  readonly inflightFrames: number;
  /** Answers of one stream handed to the transport and not yet written out before it stops starting frames. */
  readonly unsentAnswers: number;
  /** Deadline of one frame from its arrival, ms (0: none). */
  readonly frameTimeoutMs: number;
}

/**
 * A raw tensor frame (gRPC): its size on the wire, and its tensor, decoded when the frame runs
 * (a frame whose tensor does not decode is answered INVALID_ARGUMENT, as a non-image is).
 */
export interface TensorFrame {
  readonly byteLength: number;
  decode(): Tensor;
}

/** A frame as it waits: encoded image bytes, or a raw tensor. */
type FrameInput =
  { readonly kind: 'image'; readonly bytes: Uint8Array } | ({ readonly kind: 'tensor' } & TensorFrame);

/** A frame's size on the wire (what --stream_max_frame_bytes limits). */
const frameBytes = (input: FrameInput): number =>
  input.kind === 'image' ? input.bytes.byteLength : input.byteLength;

/** One processed frame, or one frame that failed (the stream stays open). */
export type FrameAnswer =
  | {
      readonly frame: number;
      readonly modelVersion: number;
      /** The `/invocations` answer's JSON text for this image. */
      readonly resultJson: string;
      readonly timings: { readonly queueMs: number; readonly inferenceMs: number; readonly totalMs: number };
      readonly dropped: number;
    }
  | { readonly frame: number; readonly error: ServingError };

/** What a stream needs of its transport. */
export interface FrameSink {
  /** Sends one answer; `written` runs once the transport has handed it to its socket. */
  send(answer: FrameAnswer, written: () => void): void;
  /** Stops / restarts reading frames from the client (flow control). */
  pause(): void;
  resume(): void;
  /** Ends the stream for a fatal error (the transport picks its close code from `error.code`). */
  fail(error: ServingError): void;
}

export interface FrameStreamsDeps {
  readonly service: InferenceService<ServableAssets>;
  readonly imageDecodes: ConcurrencyLimit;
  readonly limits: FrameStreamLimits;
  readonly logger: Logger;
  /** Each frame is a request to it (api `stream`, method `frame`). */
  readonly observer?: RequestObserver | undefined;
}

export interface OpenRequest {
  readonly model: ModelSpec;
  readonly policy: FramePolicy;
  /** The request that opened the stream (its headers reach the observer). */
  readonly headers: IncomingHttpHeaders;
  /** The transport's name in metrics ("http" for the WebSocket, "grpc"). */
  readonly transport: 'http' | 'grpc';
}

/** The streams of one server: opened by transports, closed all at once on shutdown. */
export interface FrameStreams {
  readonly limits: FrameStreamLimits;
  /**
   * Opens a stream after the checks a stream needs before its first frame (the open-stream
   * limit: RESOURCE_EXHAUSTED; the model: NOT_FOUND; an image model: FAILED_PRECONDITION).
   */
  open(request: OpenRequest, sink: FrameSink): FrameStream;
  /** Open streams now. */
  readonly size: number;
  /** Open streams per transport and frames per model by outcome (metrics). */
  counts(): FrameStreamCounts;
  /** Fails every open stream with UNAVAILABLE (shutdown) and refuses new ones. */
  closeAll(): void;
}

export function createFrameStreams(deps: FrameStreamsDeps): FrameStreams {
  const open = new Set<FrameStream>();
  const tally = new FrameStreamTally();
  let closed = false;
  return {
    limits: deps.limits,
    get size() {
      return open.size;
    },
    counts: () => tally.snapshot(),
    open(request, sink) {
      if (closed) throw new ServingError(Code.UNAVAILABLE, 'Server is shutting down');
      if (open.size >= deps.limits.maxOpen) {
        throw new ServingError(
          Code.RESOURCE_EXHAUSTED,
          `Too many open frame streams (--stream_max_open=${deps.limits.maxOpen})`,
        );
      }
      checkStreamable(deps.service, request.model);
      const transport = request.transport === 'grpc' ? 'grpc' : 'websocket';
      const stream = new FrameStream(deps, request, sink, tally, () => {
        open.delete(stream);
        tally.closed(transport);
      });
      open.add(stream);
      tally.opened(transport);
      return stream;
    },
    closeAll() {
      closed = true;
      for (const stream of [...open])
        stream.fail(new ServingError(Code.UNAVAILABLE, 'Server is shutting down'));
    },
  };
}

/** NOT_FOUND for an unknown model or version (as /invocations answers it). */
function checkStreamable(service: InferenceService<ServableAssets>, model: ModelSpec): void {
  const versions = service.status(model);
  if (versions.length === 0)
    throw new ServingError(Code.NOT_FOUND, `Servable not found for request: ${model.name}`);
}

/** The image settings a frame needs, or FAILED_PRECONDITION naming what is missing. */
function imageConfigOf(
  servable: Servable<ServableAssets>,
): NonNullable<ServableAssets['vision']['config']>['image'] {
  const image = servable.assets.vision.config?.image;
  if (servable.assets.handlerModulePath !== undefined || image === undefined) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `Model ${servable.name} version ${servable.version} has no image config in visionserve.json (frame streams serve image models without code/inference.js)`,
    );
  }
  return image;
}

/** A version a raw tensor frame can go to: one without user code (FAILED_PRECONDITION otherwise). */
function checkTensorServable(servable: Servable<ServableAssets>): Servable<ServableAssets> {
  if (servable.assets.handlerModulePath !== undefined) {
    throw new ServingError(
      Code.FAILED_PRECONDITION,
      `Model ${servable.name} version ${servable.version} runs code/inference.js: frame streams serve models without user code`,
    );
  }
  return servable;
}

/** First and longest wait before a shed frame of an `all` stream tries again, ms. */
const SHED_RETRY_MS = 5;
const SHED_RETRY_MAX_MS = 100;

interface Pending {
  readonly index: number;
  readonly input: FrameInput;
  readonly arrivedAt: number;
}

interface Started {
  readonly index: number;
  answer: FrameAnswer | undefined;
  /** The `tracking` of the model version that answered it (visionserve.json), if any. */
  tracking?: TrackerConfig | undefined;
}

/** A frame's answer from its model version, with that version's tracking config. */
interface Prediction {
  readonly version: number;
  readonly body: Uint8Array;
  readonly tracking: TrackerConfig | undefined;
}

/** One stream: its queue, its frames in flight, its answers in frame order. */
export class FrameStream {
  private nextIndex = 0;
  private dropped = 0;
  private readonly waiting: Pending[] = [];
  /** Frames started, in frame order; answered from the front. */
  private readonly started: Started[] = [];
  private running = 0;
  private unsent = 0;
  private paused = false;
  private ended = false;
  private onDrained: (() => void) | undefined;
  private readonly abort = new AbortController();
  /** Box identities across this stream's frames, made from the first tracking config seen. */
  private tracker: { readonly config: TrackerConfig; readonly tracker: Tracker } | undefined;

  constructor(
    private readonly deps: FrameStreamsDeps,
    private readonly request: OpenRequest,
    private readonly sink: FrameSink,
    private readonly tally: FrameStreamTally,
    private readonly onGone: () => void,
  ) {}

  /** Frames dropped so far (`latest`). */
  get droppedFrames(): number {
    return this.dropped;
  }

  /** One encoded frame from the client (the transport gives up the buffer). */
  push(bytes: Uint8Array): void {
    this.enqueue({ kind: 'image', bytes });
  }

  /** One raw tensor frame from the client (gRPC), under the same frame-size limit. */
  pushTensor(frame: TensorFrame): void {
    this.enqueue({ kind: 'tensor', byteLength: frame.byteLength, decode: () => frame.decode() });
  }

  private enqueue(input: FrameInput): void {
    if (this.ended) return;
    const index = this.nextIndex++;
    const pending = { index, input, arrivedAt: performance.now() };
    const byteLength = frameBytes(input);
    if (byteLength > this.deps.limits.maxFrameBytes) {
      this.fail(
        new ServingError(
          Code.RESOURCE_EXHAUSTED,
          `Frame ${index} of ${byteLength} bytes exceeds --stream_max_frame_bytes=${this.deps.limits.maxFrameBytes}`,
          { reason: 'body-too-large' },
        ),
      );
      return;
    }
    if (this.request.policy === 'latest') {
      // Only the newest waiting frame is worth processing: the older one is stale.
      if (this.waiting.length > 0) {
        this.waiting.length = 0;
        this.dropped++;
        this.tally.frame(this.request.model.name, 'dropped');
      }
    }
    this.waiting.push(pending);
    this.pump();
  }

  /**
   * The client sent its last frame: `done` runs once every frame it sent is answered (at
   * once when none is pending), and the stream is then closed.
   */
  finish(done: () => void): void {
    this.onDrained = done;
    this.checkDrained();
  }

  private checkDrained(): void {
    const done = this.onDrained;
    if (
      done === undefined ||
      this.ended ||
      this.waiting.length > 0 ||
      this.started.length > 0 ||
      this.unsent > 0
    )
      return;
    this.onDrained = undefined;
    this.close();
    done();
  }

  /** The client went away or the transport closed: in-flight frames are cancelled. */
  close(): void {
    if (this.ended) return;
    this.ended = true;
    this.waiting.length = 0;
    this.abort.abort(new ServingError(Code.CANCELLED, 'Stream closed'));
    this.onGone();
  }

  /** Ends the stream with a fatal error, told to the client. */
  fail(error: ServingError): void {
    if (this.ended) return;
    this.close();
    this.sink.fail(error);
  }

  /** Starts what the limits allow, and pauses or resumes reading. */
  private pump(): void {
    const { inflightFrames, unsentAnswers, queueFrames } = this.deps.limits;
    while (
      !this.ended &&
      this.waiting.length > 0 &&
      this.running < inflightFrames &&
      this.started.length < inflightFrames + unsentAnswers &&
      this.unsent < unsentAnswers
    ) {
      this.start(this.waiting.shift()!);
    }
    if (this.ended) return;
    const full = this.request.policy === 'all' && this.waiting.length >= queueFrames;
    if (full && !this.paused) {
      this.paused = true;
      this.sink.pause();
    } else if (!full && this.paused) {
      this.paused = false;
      this.sink.resume();
    }
  }

  private start(frame: Pending): void {
    const slot: Started = { index: frame.index, answer: undefined };
    this.started.push(slot);
    this.running++;
    void this.process(frame, slot).then((answer) => {
      this.running--;
      slot.answer = answer;
      this.flush();
      this.pump();
    });
  }

  /** Sends the answers at the front of the order that are ready. */
  private flush(): void {
    while (!this.ended && this.started[0]?.answer !== undefined) {
      const slot = this.started.shift()!;
      const answer = this.tracked(slot.answer!, slot.tracking);
      this.unsent++;
      this.sink.send(answer, () => {
        this.unsent--;
        this.pump();
        this.checkDrained();
      });
    }
  }

  /**
   * A detector's answer with a `track_id` on each box, when its model asks for tracking; called
   * in frame order, so the tracker sees the frames as the client sent them. A version with
   * another tracking config (a rollover) starts a new tracker.
   */
  private tracked(answer: FrameAnswer, config: TrackerConfig | undefined): FrameAnswer {
    if (config === undefined || 'error' in answer) return answer;
    if (this.tracker?.config !== config) this.tracker = { config, tracker: createTracker(config) };
    const result = trackInvocationAnswer(this.tracker.tracker, JSON.parse(answer.resultJson) as unknown);
    return { ...answer, resultJson: JSON.stringify(result) };
  }

  /** One frame as one request: admission, deadline, a pinned version, the /invocations answer. */
  private async process(frame: Pending, slot: Started): Promise<FrameAnswer> {
    const startedAt = performance.now();
    const { signal, dispose } = frameSignal(this.abort.signal, this.deps.limits.frameTimeoutMs);
    const call: CallOptions = {
      signal,
      deadline:
        this.deps.limits.frameTimeoutMs > 0 ? Date.now() + this.deps.limits.frameTimeoutMs : undefined,
    };
    const observed = this.deps.observer?.begin({
      api: 'stream',
      transport: this.request.transport,
      method: 'frame',
      headers: this.request.headers,
      signal,
      startedAt,
    });
    let answer: FrameAnswer;
    try {
      const { version, body, tracking } = await this.predict(frame.input, call);
      slot.tracking = tracking;
      const done = performance.now();
      answer = {
        frame: frame.index,
        modelVersion: version,
        resultJson: Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'),
        timings: {
          queueMs: startedAt - frame.arrivedAt,
          inferenceMs: done - startedAt,
          totalMs: done - frame.arrivedAt,
        },
        dropped: this.dropped,
      };
    } catch (error) {
      answer = { frame: frame.index, error: this.frameError(error) };
    } finally {
      dispose();
    }
    const code = 'error' in answer ? answer.error.code : Code.OK;
    observed?.({ status: Code[code], code, bytesIn: frameBytes(frame.input), bytesOut: 0 });
    this.tally.frame(this.request.model.name, 'error' in answer ? 'failed' : 'answered');
    return answer;
  }

  /**
   * With `all`, a frame that admission sheds (the model's queue is too long) waits and tries
   * again until its deadline instead of failing: every frame is processed, and the stream's
   * queue fills and stops reading the socket meanwhile. With `latest` it is answered UNAVAILABLE.
   */
  private async predict(input: FrameInput, call: CallOptions): Promise<Prediction> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.predictOnce(input, call);
      } catch (error) {
        const shed = error instanceof ServingError && error.reason === 'overloaded';
        if (!shed || this.request.policy !== 'all' || call.signal?.aborted === true) throw error;
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(SHED_RETRY_MAX_MS, SHED_RETRY_MS << attempt)),
        );
      }
    }
  }

  private async predictOnce(input: FrameInput, call: CallOptions): Promise<Prediction> {
    if (input.kind === 'image' && input.bytes.byteLength === 0) throw invalidArgument('Empty frame');
    // A tensor that does not decode fails before it takes a place in the model's queue.
    const frame = input.kind === 'image' ? input : { kind: 'tensor' as const, tensor: input.decode() };
    const { service, imageDecodes } = this.deps;
    const release = service.admit(this.request.model, call);
    try {
      return await service.withServable(
        this.request.model,
        async (servable) => ({
          version: servable.version,
          body:
            frame.kind === 'image'
              ? await runImageInvocation(servable, imageConfigOf(servable)!, frame.bytes, call, imageDecodes)
              : await runTensorInvocation(checkTensorServable(servable), frame.tensor, call),
          tracking: servable.assets.vision.config?.tracking,
        }),
        call,
      );
    } finally {
      release();
    }
  }

  private frameError(error: unknown): ServingError {
    const serving = toServingError(error);
    if (serving.code === Code.INTERNAL && !(error instanceof ServingError)) {
      this.deps.logger.error('frame stream: frame failed', { error, model: this.request.model.name });
    }
    return serving;
  }
}

/** The frame's signal: the stream's, and its deadline. */
function frameSignal(stream: AbortSignal, timeoutMs: number): { signal: AbortSignal; dispose: () => void } {
  if (timeoutMs <= 0) return { signal: stream, dispose: () => undefined };
  const controller = new AbortController();
  const onAbort = (): void => {
    controller.abort(stream.reason);
  };
  stream.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => {
    controller.abort(new ServingError(Code.DEADLINE_EXCEEDED, `Frame timed out after ${timeoutMs} ms`));
  }, timeoutMs);
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      stream.removeEventListener('abort', onAbort);
    },
  };
}
