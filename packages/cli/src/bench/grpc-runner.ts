/** The gRPC Predict paths (tensor_content or typed values) as PathRunners. */
import type { TensorEncoding, TfsGrpcClient } from '@visionserve/client';
import type { BenchCase } from './bench-cases.js';
import { type PathRunner, createSendRunner } from './path-runner.js';
import type { GcTotals } from './server-gc.js';

export interface GrpcRunnerOptions {
  readonly client: TfsGrpcClient;
  readonly benchCase: BenchCase;
  /** Request encoding; the response encoding is the server's (--enable_serialization_as_tensor_content). */
  readonly encoding: TensorEncoding;
  /** The server's pid, for server CPU. Default: not measured. */
  readonly serverPid?: number;
  /** The server's GC totals so far. Default: not measured. */
  readonly serverGc?: () => GcTotals;
}

export function createGrpcRunner(options: GrpcRunnerOptions): PathRunner {
  const { client, benchCase, encoding } = options;
  return createSendRunner({
    send: async () => (await client.predict(benchCase.model, benchCase.inputs, { encoding })).wire,
    ...(options.serverPid !== undefined ? { serverPid: options.serverPid } : {}),
    ...(options.serverGc !== undefined ? { serverGc: options.serverGc } : {}),
  });
}
