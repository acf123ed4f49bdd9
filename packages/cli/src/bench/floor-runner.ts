/** A floor (ort-floor.ts) as a PathRunner: closed loop at concurrency 1 in a worker thread. */
import type { OrtFloor } from './ort-floor.js';
import type { PathRunner } from './path-runner.js';

export interface FloorRunner extends PathRunner {
  /** The JSON answer of the last unit of the last block (image floor only). */
  lastAnswer(): string | undefined;
}

/**
 * `requestBytes` is what the unit starts from (the input tensors, or the encoded image).
 * Open-loop specs run as closed loops: a floor has no queue to measure.
 */
export function createFloorRunner(floor: OrtFloor, requestBytes: number): FloorRunner {
  let answer: string | undefined;
  return {
    async runBlock(spec) {
      const r = await floor.measure({
        warmup: spec.warmup,
        durationMs: spec.durationMs,
        minRuns: spec.minRequests,
        maxRuns: spec.maxRequests,
      });
      answer = r.answer ?? answer;
      // Units run back to back: the block's wall time is their sum (throughput = 1000 / mean).
      const wallMs = r.latenciesMs.reduce((a, b) => a + b, 0);
      return {
        latenciesMs: r.latenciesMs,
        errors: 0,
        firstError: undefined,
        wallMs,
        clientCpuMs: undefined,
        serverCpuMs: undefined,
        wire: { requestBytes, responseBytes: r.resultBytes },
        ratePerSecond: undefined,
      };
    },
    lastAnswer: () => answer,
  };
}
