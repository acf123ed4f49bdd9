/**
 * One serving path of one case as something that runs timed blocks. Network paths are
 * built from a `Send` (one request) with `createSendRunner`; the in-process probe and the
 * floors run their blocks elsewhere (a child process, a worker) and report the same Sample.
 */
import type { WireBytes } from '@visionserve/client';
import { type LoopResult, type Send, closedLoop, openLoop, warmUp } from './load-loop.js';
import { ownCpuMs, processCpuMs } from './proc-cpu.js';
import { type GcTotals, gcBetween } from './server-gc.js';

export type LoopMode = 'closed' | 'open';

export interface BlockSpec {
  readonly mode: LoopMode;
  /** Requests in flight (closed loop). */
  readonly concurrency: number;
  /** Arrival rate, req/s (open loop). */
  readonly ratePerSecond: number;
  /** Untimed requests before the block, one after another. */
  readonly warmup: number;
  /**
   * After the warmup requests, keep warming up until this much time has passed, in ms, so a
   * fresh server process reaches its JIT and GC steady state (ignored when warmup is 0). Default 0.
   */
  readonly warmupMs?: number;
  /** Run for durationMs, at least minRequests, at most maxRequests. */
  readonly durationMs: number;
  readonly minRequests: number;
  readonly maxRequests: number;
  /** Called about every 250 ms with the requests completed so far (where the runner can). */
  readonly onProgress?: (completed: number) => void;
}

/** One measured block. */
export interface Sample extends LoopResult {
  /** CPU of the load generator during the block, ms (undefined where it is not separate). */
  readonly clientCpuMs: number | undefined;
  /** CPU of the server process during the block, ms (undefined where unknown). */
  readonly serverCpuMs: number | undefined;
  /** Garbage collection in the server during the block (undefined where unknown). */
  readonly serverGc?: GcTotals | undefined;
  readonly wire: WireBytes | undefined;
  /** Open-loop arrival rate; undefined for the closed loop. */
  readonly ratePerSecond: number | undefined;
}

export interface PathRunner {
  runBlock(spec: BlockSpec): Promise<Sample>;
}

/** A path that cannot run in this configuration, with the reason for the report. */
export interface Unavailable {
  readonly unavailable: string;
}

export interface SendRunnerOptions {
  /** One request: resolves once the answer is received and decoded; returns its wire bytes. */
  readonly send: () => Promise<WireBytes | undefined>;
  /** Process whose CPU counts as server CPU (same machine only). Default: none measured. */
  readonly serverPid?: number;
  /** The server's GC totals so far (see server-gc.ts). Default: not measured. */
  readonly serverGc?: () => GcTotals;
}

/** A client-side path: warm-up, then a closed or open loop of `send`, with client and server CPU. */
export function createSendRunner(options: SendRunnerOptions): PathRunner {
  let wire: WireBytes | undefined;
  const send: Send = async () => {
    wire = (await options.send()) ?? wire;
  };
  return {
    async runBlock(spec) {
      await warmUp(send, spec.warmup, spec.warmupMs);
      const limits = {
        durationMs: spec.durationMs,
        minRequests: spec.minRequests,
        maxRequests: spec.maxRequests,
        ...(spec.onProgress ? { onProgress: spec.onProgress } : {}),
      };
      const pid = options.serverPid;
      const server0 = pid !== undefined ? await processCpuMs(pid) : undefined;
      const gc0 = options.serverGc?.();
      const client0 = ownCpuMs();
      const r =
        spec.mode === 'closed'
          ? await closedLoop(send, spec.concurrency, limits)
          : await openLoop(send, spec.ratePerSecond, limits);
      const client1 = ownCpuMs();
      const server1 = pid !== undefined ? await processCpuMs(pid) : undefined;
      // --trace-gc lines of the block's last collections may still be in the pipe.
      if (options.serverGc) await new Promise((resolve) => setTimeout(resolve, 20));
      const gc1 = options.serverGc?.();
      return {
        ...r,
        clientCpuMs: client1 - client0,
        serverCpuMs: server0 !== undefined && server1 !== undefined ? server1 - server0 : undefined,
        serverGc: gcBetween(gc0, gc1),
        wire,
        ratePerSecond: spec.mode === 'open' ? spec.ratePerSecond : undefined,
      };
    },
  };
}
