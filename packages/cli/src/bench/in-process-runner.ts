/** The in-process path as a PathRunner: blocks run inside the probe process (in-process-probe.ts). */
import { byteSize } from '@visionserve/protocol';
import type { BenchCase } from './bench-cases.js';
import type { InProcessProbe } from './in-process-probe.js';
import type { PathRunner } from './path-runner.js';

/** The probe's CPU (its core and its load loop, one process) counts as server CPU; there is no client. */
export function createInProcessRunner(probe: InProcessProbe, benchCase: BenchCase): PathRunner {
  let requestBytes = 0;
  for (const t of Object.values(benchCase.inputs)) requestBytes += byteSize(t);
  return {
    async runBlock(spec) {
      const r = await probe.run({
        model: benchCase.model,
        inputs: benchCase.inputs,
        mode: spec.mode,
        concurrency: spec.concurrency,
        ratePerSecond: spec.ratePerSecond,
        warmup: spec.warmup,
        durationMs: spec.durationMs,
        minRequests: spec.minRequests,
        maxRequests: spec.maxRequests,
      });
      return {
        latenciesMs: r.latenciesMs,
        errors: r.errors,
        firstError: r.firstError,
        wallMs: r.wallMs,
        clientCpuMs: undefined,
        serverCpuMs: r.cpuMs,
        wire: { requestBytes, responseBytes: r.outputBytes },
        ratePerSecond: spec.mode === 'open' ? spec.ratePerSecond : undefined,
      };
    },
  };
}
