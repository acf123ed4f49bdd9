/** The /invocations path (encoded image in, top-k JSON out) as a PathRunner. */
import type { InvocationsClient } from '@visionserve/client';
import type { CaseImage } from './bench-cases.js';
import { type PathRunner, createSendRunner } from './path-runner.js';
import type { GcTotals } from './server-gc.js';

export interface InvocationsRunnerOptions {
  readonly client: InvocationsClient;
  /** Model name (sent as `X-Amzn-SageMaker-Custom-Attributes: tfs-model-name=...`). */
  readonly model: string;
  readonly image: CaseImage;
  /** The server's pid, for server CPU. Default: not measured. */
  readonly serverPid?: number;
  /** The server's GC totals so far. Default: not measured. */
  readonly serverGc?: () => GcTotals;
}

/** `Content-Type: application/x-image`; each answer is parsed as JSON. */
export function createInvocationsRunner(options: InvocationsRunnerOptions): PathRunner {
  const { client, model, image } = options;
  return createSendRunner({
    send: async () => {
      const r = await client.invoke(image.bytes, { model, contentType: 'application/x-image' });
      r.json();
      return r.wire;
    },
    ...(options.serverPid !== undefined ? { serverPid: options.serverPid } : {}),
    ...(options.serverGc !== undefined ? { serverGc: options.serverGc } : {}),
  });
}
