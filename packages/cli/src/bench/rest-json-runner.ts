/** The REST JSON path (`:predict`, row format) as a PathRunner. */
import type { TfsRestClient } from '@visionserve/client';
import type { BenchCase } from './bench-cases.js';
import { type PathRunner, createSendRunner } from './path-runner.js';
import type { GcTotals } from './server-gc.js';

export interface RestJsonRunnerOptions {
  readonly client: TfsRestClient;
  readonly benchCase: BenchCase;
  /** The server's pid, for server CPU. Default: not measured. */
  readonly serverPid?: number;
  /** The server's GC totals so far. Default: not measured. */
  readonly serverGc?: () => GcTotals;
}

/** `{"instances": ...}` in, `{"predictions": ...}` out, decoded into tensors (the case's output dtypes). */
export function createRestJsonRunner(options: RestJsonRunnerOptions): PathRunner {
  const { client, benchCase } = options;
  return createSendRunner({
    send: async () =>
      (await client.predict(benchCase.model, benchCase.inputs, { format: 'row', outputs: benchCase.outputs }))
        .wire,
    ...(options.serverPid !== undefined ? { serverPid: options.serverPid } : {}),
    ...(options.serverGc !== undefined ? { serverGc: options.serverGc } : {}),
  });
}
