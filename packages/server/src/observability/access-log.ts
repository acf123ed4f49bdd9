import { Code } from '@visionserve/protocol';
import type { RequestEnd } from '../frontends/shared/request-observer.js';
import type { Logger } from '../util/logger.js';
import type { RequestRecord, RequestSink } from './request-hub.js';

export interface AccessLogOptions {
  /** Where lines go (one JSON object per request, message "access"). */
  readonly logger: Logger;
  /**
   * Fraction of successful requests logged, 0..1; failed requests (status >= 400 / not OK) are
   * logged up to maxFailuresPerSecond.
   */
  readonly samplingRate: number;
  /**
   * Failed requests logged per second at most: past it, in the same second, they are counted
   * and the count is logged once with the next line (a flood of bad requests cannot flood the
   * log). Default 100.
   */
  readonly maxFailuresPerSecond?: number | undefined;
  /** Clock in ms (tests). Default Date.now. */
  readonly now?: (() => number) | undefined;
  /** APIs never logged (health probes and metrics scrapes). Default ["ops"]. */
  readonly skipApis?: readonly string[] | undefined;
  /** Random source in [0, 1) (tests). Default Math.random. */
  readonly random?: (() => number) | undefined;
}

/** Incoming request ids are kept when they are short and printable; longer ones are cut. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Structured access log: one line per sampled request with its id (`x-request-id` when the
 * client sent one, else generated), API, method, model, version, status, latency and sizes.
 */
export function createAccessLog(options: AccessLogOptions): RequestSink {
  const { logger, samplingRate } = options;
  const skip = new Set(options.skipApis ?? ['ops']);
  const random = options.random ?? Math.random;
  const admitFailure = failureBudget(options.maxFailuresPerSecond ?? 100, options.now ?? Date.now, logger);
  const prefix = `${process.pid.toString(36)}-${Date.now().toString(36)}-`;
  let sequence = 0;
  return {
    requestEnded(record: RequestRecord, end: RequestEnd, endedAt: number) {
      if (skip.has(record.api)) return;
      const failed = end.code !== Code.OK;
      if (failed ? !admitFailure() : !(random() < samplingRate)) return;
      const raw = record.headers['x-request-id'];
      const given = Array.isArray(raw) ? raw[0] : raw;
      const id =
        given !== undefined && REQUEST_ID.test(given) ? given : `${prefix}${(sequence++).toString(36)}`;
      logger.info('access', {
        requestId: id,
        api: record.api,
        method: record.method,
        model: record.model,
        version: record.version,
        status: end.status,
        code: end.code,
        latencyMs: Math.round((endedAt - record.startedAt) * 1000) / 1000,
        bytesIn: end.bytesIn,
        bytesOut: end.bytesOut,
        ...(record.timings === undefined
          ? {}
          : {
              queueMs: Math.round(record.timings.queueMs * 1000) / 1000,
              inferenceMs: Math.round(record.timings.computeMs * 1000) / 1000,
              batchSize: record.timings.batchSize,
            }),
      });
    },
  };
}

/**
 * Admits at most `perSecond` failure lines in each second of `now`; the failures left out are
 * counted and logged as one line when the next second's first one is admitted.
 */
function failureBudget(perSecond: number, now: () => number, logger: Logger): () => boolean {
  let second = -1;
  let used = 0;
  let skipped = 0;
  return () => {
    const current = Math.floor(now() / 1000);
    if (current !== second) {
      if (skipped > 0) {
        logger.warn('access log: failed requests not logged (over --access_log_max_failures_per_second)', {
          notLogged: skipped,
          perSecond,
        });
      }
      second = current;
      used = 0;
      skipped = 0;
    }
    if (used < perSecond) {
      used++;
      return true;
    }
    skipped++;
    return false;
  };
}
