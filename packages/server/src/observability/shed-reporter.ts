import type { Logger } from '../util/logger.js';

/** Why a request was refused before it ran. */
export type ShedReason = 'inflight-budget' | 'queue-wait' | 'json-decode';

/**
 * Every admission refusal of the process goes through one reporter: it counts refusals per
 * reason (exported as `visionserve_shed_requests_total{reason}`) and logs
 * `overloaded: shedding requests` at most once per interval and reason, with the count
 * since the last line and one example.
 */
export interface ShedReporter {
  /** Records one refusal. `details` go into the log line (numbers and short strings). */
  report(reason: ShedReason, model: string | undefined, message: string, details?: ShedDetails): void;
  /** Refusals since start, per reason (only reasons that happened). */
  counts(): ReadonlyMap<ShedReason, number>;
}

export type ShedDetails = Readonly<Record<string, number | string | undefined>>;

export interface ShedReporterOptions {
  readonly logger: Logger;
  /** Least time between two log lines of one reason, in ms. Default 10000. */
  readonly logIntervalMs?: number;
  /** Clock in ms. Default performance.now. */
  readonly now?: () => number;
}

export function createShedReporter(options: ShedReporterOptions): ShedReporter {
  const { logger } = options;
  const logIntervalMs = options.logIntervalMs ?? 10_000;
  const now = options.now ?? (() => performance.now());
  const totals = new Map<ShedReason, number>();
  const lastLog = new Map<ShedReason, { at: number; since: number }>();
  return {
    report(reason, model, message, details) {
      totals.set(reason, (totals.get(reason) ?? 0) + 1);
      const at = now();
      const last = lastLog.get(reason) ?? { at: -Infinity, since: 0 };
      last.since++;
      lastLog.set(reason, last);
      if (at - last.at < logIntervalMs) return;
      logger.warn('overloaded: shedding requests', {
        reason,
        model,
        refused: last.since,
        example: message,
        ...details,
      });
      last.at = at;
      last.since = 0;
    },
    counts: () => totals,
  };
}
