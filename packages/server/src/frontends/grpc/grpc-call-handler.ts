/**
 * What the gRPC server does with each call's stream a transport hands it: the call's state
 * and its end, the observer's report, the route to its method by path, the header checks and
 * the deadline, then a unary call (its message read whole, the handler, the one response) or
 * a streaming one (grpc-stream-call.ts).
 */
import { Code, ServingError } from '@visionserve/protocol';
import { createOutputLease } from '../../core/output-lease.js';
import type { Logger } from '../../util/logger.js';
import { credentialsOf } from '../shared/management-guard.js';
import type { RequestEnd, RequestObserver } from '../shared/request-observer.js';
import type { GrpcCallStream } from './call-stream.js';
import {
  type CallState,
  acceptEncoding,
  armBodyTimer,
  armDeadline,
  closeCall,
  finishCall,
  isGrpcContentType,
  newCall,
  respondCall,
} from './grpc-call.js';
import { type MessageLimits, readUnaryMessage } from './grpc-message-reader.js';
import type { GrpcMethod, GrpcService } from './grpc-service.js';
import { serveStreamCall } from './grpc-stream-call.js';

export interface CallHandlerOptions {
  /** The services served; two must not share a name. */
  readonly services: readonly GrpcService[];
  readonly logger: Logger;
  readonly limits: MessageLimits;
  /** A unary request whose message has not fully arrived this long after its headers is cancelled, in ms. */
  readonly bodyTimeoutMs: number;
  /** Told of every call (metrics, access logs, tracing); undefined: none. */
  readonly observer: RequestObserver | undefined;
}

export interface CallHandler {
  /** Serves one call's stream (called synchronously for every new stream). */
  handle(stream: GrpcCallStream): void;
  /** Calls received and not yet closed. */
  readonly inFlight: number;
}

/** A method and its labels for the observer. */
interface Route {
  readonly method: GrpcMethod;
  readonly api: string;
  readonly name: string;
}

/** Every method of `services` by path (`/package.Service/Method`); throws on a path met twice. */
function routesOf(services: readonly GrpcService[]): ReadonlyMap<string, Route> {
  const routes = new Map<string, Route>();
  for (const service of services) {
    for (const [name, method] of Object.entries(service.methods)) {
      const path = `/${service.name}/${name}`;
      if (routes.has(path)) throw new Error(`gRPC method ${path} registered twice`);
      routes.set(path, { method, api: service.api ?? service.name, name });
    }
  }
  return routes;
}

export function createCallHandler(options: CallHandlerOptions): CallHandler {
  const routes = routesOf(options.services);
  let inFlight = 0;
  return {
    get inFlight() {
      return inFlight;
    },
    handle(stream) {
      const call = newCall(stream, createOutputLease());
      inFlight++;
      const observed = observeCall(options.observer, routes, call);
      stream.onClose(() => {
        inFlight--;
        closeCall(call, observed);
      });
      const method = routeCall(call, routes);
      if (method === undefined || !armDeadline(call)) return;
      // A stream's messages come when the client has them: no body timeout, only its deadline.
      if (method.stream !== undefined) serveStreamCall(call, method, method.stream, options.limits);
      else serveUnaryCall(call, method, options);
    },
  };
}

/** The observer's end-of-call report for `call`, begun now; undefined without an observer. */
function observeCall(
  observer: RequestObserver | undefined,
  routes: ReadonlyMap<string, Route>,
  call: CallState,
): ((end: RequestEnd) => void) | undefined {
  if (observer === undefined) return undefined;
  const { headers } = call.stream;
  const route = routes.get(headers[':path'] ?? '');
  return observer.begin({
    api: route?.api ?? 'grpc',
    transport: 'grpc',
    method: route?.name ?? 'unknown',
    headers,
    signal: call.controller.signal,
    startedAt: performance.now(),
  });
}

/**
 * The method a gRPC request calls, once its headers pass the checks; undefined when the call
 * is answered already (not gRPC: HTTP 415; an unknown method or message encoding: UNIMPLEMENTED).
 */
function routeCall(call: CallState, routes: ReadonlyMap<string, Route>): GrpcMethod | undefined {
  const { stream } = call;
  const { headers } = stream;
  if (headers[':method'] !== 'POST' || !isGrpcContentType(headers['content-type'])) {
    stream.respondUnsupported();
    call.answered = true;
    return undefined;
  }
  const path = headers[':path'] ?? '';
  const route = routes.get(path);
  if (route === undefined) {
    finishCall(call, new ServingError(Code.UNIMPLEMENTED, `Method not found: ${path}`));
    return undefined;
  }
  return acceptEncoding(call) ? route.method : undefined;
}

/** A unary call: its message read whole (within the body timeout), the handler, the one answer. */
function serveUnaryCall(call: CallState, method: GrpcMethod, options: CallHandlerOptions): void {
  const { stream } = call;
  const { headers } = stream;
  const bodyTimer = armBodyTimer(call, options.bodyTimeoutMs);
  readUnaryMessage(call, method, options.limits)
    .then(({ message, buffer }) => {
      clearTimeout(bodyTimer);
      call.bytesIn = message.byteLength;
      return method.handler(message, {
        signal: call.controller.signal,
        deadline: call.deadline,
        metadata: headers,
        messageBuffer: buffer,
        outputLease: call.outputLease,
        credentials: () => credentialsOf(headers, stream.socket),
      });
    })
    .then(
      (chunks) => {
        respondCall(call, chunks);
      },
      (error: unknown) => {
        const { signal } = call.controller;
        const cause = signal.aborted && !(error instanceof ServingError) ? (signal.reason as unknown) : error;
        if (!(cause instanceof ServingError)) {
          options.logger.error('grpc handler failed', { path: headers[':path'] ?? '', error: cause });
        }
        finishCall(call, cause);
      },
    );
}
