/**
 * The raw onnxruntime floors for benchmarks, in a worker thread with the server's session
 * options (`ortSessionOptions`), no queue, no transport: `session.run` on preloaded inputs,
 * or (with `imageWork`) the image floor: decode + preprocess + run + top-k JSON.
 */
import { Worker } from 'node:worker_threads';
import { type Tensor } from '@visionserve/protocol';
import type { OrtSessionSettings } from '@visionserve/server';
import type { FloorImageWork, FloorRequest, FloorWorkerInit, FromFloorWorker } from './ort-floor-worker.js';

export type { FloorImageWork } from './ort-floor-worker.js';

export interface OrtFloorBlock {
  /** Untimed runs first. Default 10. */
  readonly warmup?: number;
  /** Stop after this many timed runs... Default 200. */
  readonly maxRuns?: number;
  /** ...or once this much time has passed (ms), whichever comes first. Default 3000. */
  readonly durationMs?: number;
  /** ...but never before this many timed runs. Default 10. */
  readonly minRuns?: number;
}

export interface OrtFloorResult {
  /** Latency of each timed unit, ms. */
  readonly latenciesMs: number[];
  /** Bytes of the last unit's result: the output tensors, or the JSON answer (image floor). */
  readonly resultBytes: number;
  /** The JSON answer of the last unit (image floor only). */
  readonly answer: string | undefined;
}

export interface OrtFloor {
  /** Runs one timed block (one unit after another). */
  measure(block?: OrtFloorBlock): Promise<OrtFloorResult>;
  close(): Promise<void>;
}

const WORKER_URL = new URL('./ort-floor-worker.js', import.meta.url);

/** Loads `modelPath` in a dedicated worker thread (resolves once the session is ready). */
export async function createOrtFloor(
  modelPath: string,
  feeds: Readonly<Record<string, Tensor>>,
  settings: OrtSessionSettings,
  imageWork?: FloorImageWork,
): Promise<OrtFloor> {
  const init: FloorWorkerInit = {
    modelPath,
    settings,
    ...(imageWork ? { imageWork } : {}),
    feeds: Object.entries(feeds).map(([name, t]) => ({
      name,
      dtype: t.dtype,
      shape: [...t.shape],
      data: t.data,
    })),
  };
  const worker = new Worker(WORKER_URL, { workerData: init });
  const next = (): Promise<FromFloorWorker> =>
    new Promise((resolve, reject) => {
      const onMessage = (message: FromFloorWorker): void => {
        worker.off('error', onError);
        resolve(message);
      };
      const onError = (error: Error): void => {
        worker.off('message', onMessage);
        reject(error);
      };
      worker.once('message', onMessage);
      worker.once('error', onError);
    });
  const ready = await next();
  if (ready.type === 'failed') {
    await worker.terminate();
    throw new Error(`floor: cannot load ${modelPath}: ${ready.message}`);
  }
  let chain: Promise<unknown> = Promise.resolve();
  return {
    measure(block = {}) {
      const request: FloorRequest = {
        type: 'measure',
        warmup: block.warmup ?? 10,
        maxRuns: block.maxRuns ?? 200,
        durationMs: block.durationMs ?? 3000,
        minRuns: block.minRuns ?? 10,
      };
      const result = chain.then(async () => {
        const answer = next();
        worker.postMessage(request);
        const message = await answer;
        if (message.type !== 'latencies')
          throw new Error(`floor: ${message.type === 'failed' ? message.message : 'unexpected reply'}`);
        return { latenciesMs: message.latencies, resultBytes: message.resultBytes, answer: message.answer };
      });
      chain = result.catch(() => undefined);
      return result;
    },
    async close() {
      await worker.terminate();
    },
  };
}
