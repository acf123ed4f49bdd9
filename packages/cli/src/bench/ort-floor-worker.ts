/** Worker entry of ort-floor.ts: one session, timed `run` blocks on request. */
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { type DType, type TensorData } from '@visionserve/protocol';
import { type OrtSessionSettings, ortSessionOptions } from '@visionserve/server';

export interface FloorWorkerInit {
  readonly modelPath: string;
  readonly settings: OrtSessionSettings;
  readonly feeds: readonly { name: string; dtype: DType; shape: number[]; data: TensorData }[];
}
export interface FloorRequest {
  readonly type: 'measure';
  readonly warmup: number;
  readonly maxRuns: number;
  readonly durationMs: number;
  readonly minRuns: number;
}
export type FromFloorWorker =
  | { readonly type: 'ready' }
  | { readonly type: 'latencies'; readonly latencies: number[] }
  | { readonly type: 'failed'; readonly message: string };

const port = parentPort;
if (!port) throw new Error('ort-floor-worker must run in a worker thread');
const init = workerData as FloorWorkerInit;

function toOrt(feed: FloorWorkerInit['feeds'][number]): ort.Tensor {
  if (feed.dtype === 'string') {
    const decoder = new TextDecoder();
    return new ort.Tensor(
      'string',
      (feed.data as Uint8Array[]).map((b) => decoder.decode(b)),
      feed.shape,
    );
  }
  const type = feed.dtype === 'bfloat16' ? 'float16' : feed.dtype;
  return new ort.Tensor(type as 'float32', feed.data as Float32Array, feed.shape);
}

async function main(): Promise<void> {
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(init.modelPath, ortSessionOptions(init.settings));
  } catch (error) {
    port!.postMessage({
      type: 'failed',
      message: error instanceof Error ? error.message : String(error),
    } satisfies FromFloorWorker);
    return;
  }
  const feeds: Record<string, ort.Tensor> = {};
  for (const feed of init.feeds) feeds[feed.name] = toOrt(feed);
  port!.postMessage({ type: 'ready' } satisfies FromFloorWorker);
  port!.on('message', (request: FloorRequest) => {
    void (async () => {
      try {
        for (let i = 0; i < request.warmup; i++) await session.run(feeds);
        const latencies: number[] = [];
        const start = performance.now();
        while (
          latencies.length < request.minRuns ||
          (latencies.length < request.maxRuns && performance.now() - start < request.durationMs)
        ) {
          const t0 = performance.now();
          await session.run(feeds);
          latencies.push(performance.now() - t0);
        }
        port!.postMessage({ type: 'latencies', latencies } satisfies FromFloorWorker);
      } catch (error) {
        port!.postMessage({
          type: 'failed',
          message: error instanceof Error ? error.message : String(error),
        } satisfies FromFloorWorker);
      }
    })();
  });
}

void main();
