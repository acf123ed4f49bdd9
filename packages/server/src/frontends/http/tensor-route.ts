import type { DecodeTicket, JsonDecoder, LentBody } from '../../contracts/json-decoder.js';
import type { CallOptions, Servable } from '../../core/inference-service.js';
import { createOutputLease } from '../../core/output-lease.js';
import type { OutputLease } from '../../core/session.js';
import type { HttpContext, HttpRoute } from './http-api.js';

/** How one request's body is read and decoded, chosen on its pinned version before it is read. */
export interface BodyReading<D> {
  /**
   * The body is JSON read by the decode threads: checked against their backlog at the
   * headers, joins it once it has arrived, and a big one is read into lent shared memory.
   * Default false (decoded here by `decode`).
   */
  readonly decodeThread?: boolean | undefined;
  /** A byte of the body to place 8-byte aligned (binary tensor data after a JSON header). */
  readonly alignAt?: number | undefined;
  /** The body's content, as the handler reads it; `ticket` is the body's share of the decode backlog. */
  decode(body: Uint8Array, ticket: DecodeTicket | undefined): Promise<D> | D;
}

/** A request whose body is in and decoded, on its pinned version. */
export interface TensorRequest<A, D> {
  readonly ctx: HttpContext;
  readonly servable: Servable<A>;
  /** What BodyReading.decode returned. */
  readonly decoded: D;
  /** The body as received (decompressed); lent memory when it was read into a shared slot. */
  readonly body: Uint8Array;
  /** Cancellation, deadline, and `arrivedAt` (the body is in) for the statistics. */
  readonly call: CallOptions & { readonly signal: AbortSignal; readonly arrivedAt: bigint };
  /** The body's buffer when it is this request's own: input tensors viewing it move to the worker. */
  readonly ownedBuffers: readonly ArrayBuffer[] | undefined;
  /** Outputs may live in pooled memory until the response has been written (or the request failed). */
  readonly outputLease: OutputLease;
}

/**
 * A route whose body holds tensors for one model: it declares how the model is pinned and
 * how the body is decoded; the edge does the rest once (admission on the pinned version,
 * the decode backlog, the lent body, the output lease).
 */
export interface TensorRoute<A, D> {
  readonly name: string;
  readonly methods: readonly string[];
  readonly path: string | RegExp;
  /**
   * Pins the version the request names for `fn` (InferenceService.withServable, or a
   * protocol's wrapper of it with its own NOT_FOUND answers).
   */
  pin<T>(ctx: HttpContext, fn: (servable: Servable<A>) => Promise<T>, call: CallOptions): Promise<T>;
  /** Checks that need no body (media types, methods: throw to refuse) and how to read it. */
  reading(ctx: HttpContext, servable: Servable<A>): BodyReading<D>;
  /** Runs the request and writes the response. */
  handle(request: TensorRequest<A, D>): Promise<void>;
}

/**
 * The HttpRoute of a TensorRoute. Per request: pin the version, refuse at the headers when
 * it is really overloaded (Servable.admit: queue full, deadline out of reach; and the JSON
 * decode backlog), then read the body. A body on its way counts as queued model work only
 * while it arrives at least at the minimum upload rate; a trickling one counts as no one's
 * work (the edge bounds it by the byte budget, the body timeout and the minimum upload rate).
 * Once it is in, the body joins the decode backlog and stays queued model work until its
 * tensors are decoded (so the model's queue bound and deadline cover it); its run joins the
 * model's queue when the handler predicts.
 */
export function tensorRoute<A, D>(route: TensorRoute<A, D>, jsonDecode: JsonDecoder | undefined): HttpRoute {
  return {
    name: route.name,
    methods: route.methods,
    path: route.path,
    handle: (ctx) => {
      const call = { signal: ctx.signal, deadline: ctx.deadline };
      return route.pin(ctx, (servable) => serveTensorBody(route, ctx, servable, jsonDecode), call);
    },
  };
}

async function serveTensorBody<A, D>(
  route: TensorRoute<A, D>,
  ctx: HttpContext,
  servable: Servable<A>,
  jsonDecode: JsonDecoder | undefined,
): Promise<void> {
  const reading = route.reading(ctx, servable);
  const call = { signal: ctx.signal, deadline: ctx.deadline };
  const declared = ctx.req.headers['content-length'];
  const decoder = reading.decodeThread === true ? jsonDecode : undefined;
  decoder?.check(Number(declared ?? 0));
  // Queued model work while the body arrives at the minimum rate (a trickle is not), and
  // once it is in until its tensors are decoded (a JSON body waiting for a decode thread).
  const socket = ctx.req.socket;
  const mark = socket.bytesRead;
  let decoding = false;
  const decoded = servable.admit(call, {
    received: () => socket.bytesRead - mark,
    total: declared === undefined ? undefined : Number(declared),
    decoding: () => decoding,
  });
  // The response body views the outputs: their pooled memory is reused only once the
  // response has been handed to the socket or the connection is gone.
  const outputLease = createOutputLease();
  ctx.res.once('close', () => {
    outputLease.release();
  });
  // A big JSON body goes into memory its decode thread reads as it is, lent until the
  // handler is done with what was read from it (answered, failed or aborted).
  let lent: LentBody | undefined;
  let ticket: DecodeTicket | undefined;
  try {
    const body = await ctx.readBody(undefined, {
      alignAt: reading.alignAt,
      into: decoder === undefined ? undefined : (length) => (lent = decoder.bodyBuffer(length))?.bytes,
    });
    decoding = true;
    const arrivedAt = process.hrtime.bigint();
    ticket = decoder?.admit(body.byteLength, ctx);
    const content = await reading.decode(body, ticket);
    decoded();
    await route.handle({
      ctx,
      servable,
      decoded: content,
      body,
      call: { ...call, arrivedAt },
      ownedBuffers: body.buffer instanceof ArrayBuffer ? [body.buffer] : undefined,
      outputLease,
    });
  } finally {
    decoded();
    ticket?.release();
    lent?.release();
  }
}
