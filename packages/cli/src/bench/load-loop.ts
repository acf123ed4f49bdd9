/**
 * Load generation for the benchmark: a closed loop (N lanes, each sends its next request
 * when the previous one answered) and an open loop (requests at a fixed arrival rate,
 * latency measured from each request's scheduled send time, so a slow answer or a late
 * send is charged to the requests that queue behind it: no coordinated omission).
 */

/** One request; resolves when the answer has been received and decoded. */
export type Send = () => Promise<unknown>;

export interface BlockLimits {
  /** Stop starting requests after this long (ms)... */
  readonly durationMs: number;
  /** ...but only once this many were started... */
  readonly minRequests: number;
  /** ...and never start more than this many. */
  readonly maxRequests: number;
  /** Called about every 250 ms with the requests completed so far. */
  readonly onProgress?: (completed: number) => void;
}

export interface LoopResult {
  /** Latency of each successful request, ms, in completion order. */
  readonly latenciesMs: number[];
  readonly errors: number;
  readonly firstError: string | undefined;
  /** From the first send to the last answer, ms. */
  readonly wallMs: number;
}

/** Untimed requests, one after another (JIT, connections, caches); the first error propagates. */
export async function warmUp(send: Send, count: number, minMs = 0): Promise<void> {
  const start = performance.now();
  for (let i = 0; i < count || (count > 0 && performance.now() - start < minMs); i++) await send();
}

function ticker(onProgress: ((n: number) => void) | undefined, count: () => number): () => void {
  if (!onProgress) return () => undefined;
  const timer = setInterval(() => {
    onProgress(count());
  }, 250);
  timer.unref();
  return () => {
    clearInterval(timer);
  };
}

/** Closed loop at fixed concurrency. */
export async function closedLoop(send: Send, concurrency: number, limits: BlockLimits): Promise<LoopResult> {
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let started = 0;
  const t0 = performance.now();
  const stop = ticker(limits.onProgress, () => latencies.length + errors);
  const more = (): boolean =>
    started < limits.maxRequests &&
    (started < limits.minRequests || performance.now() - t0 < limits.durationMs);
  const lane = async (): Promise<void> => {
    while (more()) {
      started++;
      const s = performance.now();
      try {
        await send();
        latencies.push(performance.now() - s);
      } catch (error) {
        errors++;
        firstError ??= error instanceof Error ? error.message : String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  stop();
  return { latenciesMs: latencies, errors, firstError, wallMs: performance.now() - t0 };
}

/**
 * Open loop: `count` = clamp(rate × duration, minRequests, maxRequests) requests, request i
 * scheduled at t0 + i / rate whatever happened to earlier ones.
 */
export async function openLoop(send: Send, ratePerSecond: number, limits: BlockLimits): Promise<LoopResult> {
  const count = Math.max(
    limits.minRequests,
    Math.min(limits.maxRequests, Math.round((ratePerSecond * limits.durationMs) / 1000)),
  );
  const interval = 1000 / ratePerSecond;
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const pending: Promise<void>[] = [];
  const t0 = performance.now();
  const stop = ticker(limits.onProgress, () => latencies.length + errors);
  for (let i = 0; i < count; i++) {
    const due = t0 + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    pending.push(
      send().then(
        () => {
          latencies.push(performance.now() - due);
        },
        (error: unknown) => {
          errors++;
          firstError ??= error instanceof Error ? error.message : String(error);
        },
      ),
    );
  }
  await Promise.all(pending);
  stop();
  return { latenciesMs: latencies, errors, firstError, wallMs: performance.now() - t0 };
}
