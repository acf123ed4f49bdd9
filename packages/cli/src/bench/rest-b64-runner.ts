/** TF Serving's image_bytes idiom over REST (`{"b64": JPEG}` to the encoded-image signature) as a PathRunner. */
import type { TfsRestClient } from '@visionserve/client';
import type { BenchCase, CaseImage } from './bench-cases.js';
import { type PathRunner, createSendRunner } from './path-runner.js';

export interface RestB64RunnerOptions {
  readonly client: TfsRestClient;
  /** Model name (the case's, or its twin with the response cache). */
  readonly model: string;
  readonly benchCase: BenchCase;
  readonly image: CaseImage;
  /** The server's pid, for server CPU. Default: not measured. */
  readonly serverPid?: number;
}

/** `{"signature_name": "serving_bytes", "instances": [{"b64": ...}]}` in, raw outputs out, decoded into tensors. */
export function createRestB64Runner(options: RestB64RunnerOptions): PathRunner {
  const { client, benchCase, image } = options;
  const inputs = { image_bytes: { dtype: 'string' as const, shape: [1], data: [image.bytes] } };
  return createSendRunner({
    send: async () =>
      (
        await client.predict({ name: options.model, signatureName: 'serving_bytes' }, inputs, {
          format: 'row',
          outputs: benchCase.outputs,
        })
      ).wire,
    ...(options.serverPid !== undefined ? { serverPid: options.serverPid } : {}),
  });
}
