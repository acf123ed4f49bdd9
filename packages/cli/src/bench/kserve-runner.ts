/** The KServe v2 paths (HTTP with binary tensor data or JSON data, gRPC with raw contents) as PathRunners. */
import type { KServeGrpcClient, KServeHttpClient } from '@visionserve/client';
import type { BenchCase } from './bench-cases.js';
import { type PathRunner, createSendRunner } from './path-runner.js';
import type { GcTotals } from './server-gc.js';

export interface KServeRunnerOptions {
  /** A KServe HTTP client (binary tensor data or JSON data), or a KServe gRPC client. */
  readonly client: KServeHttpClient | KServeGrpcClient;
  readonly benchCase: BenchCase;
  /** The server's pid, for server CPU. Default: not measured. */
  readonly serverPid?: number;
  /** The server's GC totals so far. Default: not measured. */
  readonly serverGc?: () => GcTotals;
}

/** Every input in, every output back, as raw tensor bytes (binary data / raw contents). */
export function createKServeRunner(options: KServeRunnerOptions): PathRunner {
  const { client, benchCase } = options;
  return createSendRunner({
    send: async () => (await client.infer(benchCase.model, benchCase.inputs)).wire,
    ...(options.serverPid !== undefined ? { serverPid: options.serverPid } : {}),
    ...(options.serverGc !== undefined ? { serverGc: options.serverGc } : {}),
  });
}
