/**
 * OTLP/HTTP tracing of requests. Loaded only when an OTLP endpoint is configured (the
 * composition root imports this module dynamically), so a server without tracing loads no
 * OpenTelemetry code and does no per-request tracing work.
 */
import {
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { Code } from '@visionserve/protocol';
import type { RequestEnd } from '../frontends/shared/request-observer.js';
import type { Logger } from '../util/logger.js';
import type { RequestRecord, RequestSink } from './request-hub.js';

export interface RequestTracerOptions {
  /** OTLP/HTTP traces endpoint, e.g. "http://collector:4318/v1/traces". */
  readonly endpoint: string;
  /** Share of requests without a sampled `traceparent` that are traced, 0..1. */
  readonly samplingRate: number;
  /** Batching is on: predict spans get a "batch" span around queue + inference. */
  readonly batching: boolean;
  /** `service.name` of the spans. Default "visionserve". */
  readonly serviceName?: string | undefined;
  /** Most time between exports, in ms. Default 2000. */
  readonly exportDelayMs?: number | undefined;
  readonly logger: Logger;
}

export interface RequestTracer extends RequestSink {
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

/** W3C `traceparent`: version-traceid-parentid-flags (version ff and all-zero ids are invalid). */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;

/** The remote parent of a request, from its `traceparent` header; ROOT_CONTEXT when absent or invalid. */
export function parentContext(header: string | string[] | undefined): Context {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return ROOT_CONTEXT;
  const m = TRACEPARENT.exec(value.trim().toLowerCase());
  if (m === null || m[1] === 'ff' || /^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: m[2]!,
    spanId: m[3]!,
    traceFlags: Number.parseInt(m[4]!, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  });
}

/** performance.now() milliseconds -> epoch milliseconds (what OpenTelemetry takes as a time). */
const epoch = (t: number): number => performance.timeOrigin + t;

/**
 * Traces every request: a SERVER span "<api> <method>" whose parent is the request's W3C
 * `traceparent` (same trace id), with child spans for the phases core reported:
 * decode (arrival to predict start: body read and parse, image decode), queue, batch (with
 * batching on), inference (session.run) and encode (predict end to the response written).
 * Spans are built when the request ends, from the recorded times, and exported in batches.
 */
export function createRequestTracer(options: RequestTracerOptions): RequestTracer {
  const exporter = new OTLPTraceExporter({ url: options.endpoint });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName ?? 'visionserve' }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(options.samplingRate) }),
    spanProcessors: [
      new BatchSpanProcessor(exporter, { scheduledDelayMillis: options.exportDelayMs ?? 2000 }),
    ],
  });
  const tracer = provider.getTracer('visionserve');

  const child = (parent: Context, name: string, start: number, end: number, attributes = {}): void => {
    tracer.startSpan(name, { startTime: epoch(start), attributes }, parent).end(epoch(Math.max(start, end)));
  };

  return {
    requestEnded(record: RequestRecord, end: RequestEnd, endedAt: number) {
      const root: Span = tracer.startSpan(
        `${record.api} ${record.method}`,
        {
          kind: SpanKind.SERVER,
          startTime: epoch(record.startedAt),
          attributes: {
            'visionserve.api': record.api,
            'rpc.method': record.method,
            'visionserve.status': end.status,
            ...(record.transport === 'http'
              ? { 'http.response.status_code': Number(end.status) }
              : { 'rpc.grpc.status_code': end.code }),
            ...(record.model === undefined
              ? {}
              : { 'visionserve.model': record.model, 'visionserve.model_version': record.version ?? 0 }),
          },
        },
        parentContext(record.headers.traceparent),
      );
      if (!root.isRecording()) return;
      if (end.code !== Code.OK) root.setStatus({ code: SpanStatusCode.ERROR, message: end.status });
      const ctx = trace.setSpan(ROOT_CONTEXT, root);
      const started = record.predictStartedAt;
      const ended = record.predictEndedAt;
      if (started !== undefined) {
        child(ctx, 'decode', record.startedAt, started);
        const t = record.timings;
        if (t !== undefined) {
          const inferenceStart = Math.max(started, (ended ?? started) - t.computeMs);
          const queueStart = Math.max(started, inferenceStart - t.queueMs);
          if (options.batching) {
            child(ctx, 'batch', queueStart, inferenceStart + t.computeMs, {
              'visionserve.batch_size': t.batchSize,
            });
          }
          child(ctx, 'queue', queueStart, inferenceStart);
          child(ctx, 'inference', inferenceStart, inferenceStart + t.computeMs, {
            'visionserve.batch_size': t.batchSize,
          });
        }
        if (ended !== undefined) child(ctx, 'encode', ended, endedAt);
      }
      root.end(epoch(endedAt));
    },
    async shutdown() {
      try {
        await provider.shutdown();
      } catch (error) {
        options.logger.warn('tracing: export at shutdown failed', { error });
      }
    },
  };
}
