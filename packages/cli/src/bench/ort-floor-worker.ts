/**
 * Worker entry of ort-floor.ts: one session, timed blocks on request. Each timed unit is
 * either `session.run` on the preloaded feeds, or (image mode) the whole /invocations
 * work without a server: imageToTensor on the encoded image, `session.run`, top-k to JSON.
 */
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { type DType, type Tensor, type TensorData } from '@visionserve/protocol';
import { type OrtSessionSettings, ortSessionOptions } from '@visionserve/server';
import {
  type ClassificationPostprocess,
  type ImageConfig,
  type Labels,
  classifyTopK,
  parseLabels,
} from '@visionserve/vision';

/** The image pipeline of the image floor (classification models only). */
export interface FloorImageWork {
  readonly bytes: Uint8Array;
  readonly image: ImageConfig;
  /** Input alias of the image tensor. */
  readonly input: string;
  readonly postprocess: ClassificationPostprocess;
  /** Output alias of the scores. */
  readonly output: string;
  readonly labelsText: string | undefined;
}

export interface FloorWorkerInit {
  readonly modelPath: string;
  readonly settings: OrtSessionSettings;
  readonly feeds: readonly { name: string; dtype: DType; shape: number[]; data: TensorData }[];
  /** When set, each timed unit is decode + preprocess + run + top-k instead of `run` alone. */
  readonly imageWork?: FloorImageWork;
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
  | {
      readonly type: 'latencies';
      readonly latencies: number[];
      /** Bytes of the last unit's result: output tensors, or the JSON answer in image mode. */
      readonly resultBytes: number;
      /** The last JSON answer (image mode). */
      readonly answer: string | undefined;
    }
  | { readonly type: 'failed'; readonly message: string };

const port = parentPort;
if (!port) throw new Error('ort-floor-worker must run in a worker thread');
const init = workerData as FloorWorkerInit;

function toOrt(dtype: DType, shape: readonly number[], data: TensorData): ort.Tensor {
  if (dtype === 'string') {
    const decoder = new TextDecoder();
    return new ort.Tensor(
      'string',
      (data as Uint8Array[]).map((b) => decoder.decode(b)),
      [...shape],
    );
  }
  const type = dtype === 'bfloat16' ? 'float16' : dtype;
  return new ort.Tensor(type as 'float32', data as Float32Array, [...shape]);
}

function fromOrt(t: ort.Tensor): Tensor {
  return { dtype: t.type as DType, shape: [...t.dims], data: t.data as Float32Array };
}

/** One timed unit; resolves with its result size and, in image mode, the JSON answer. */
type Unit = () => Promise<{ readonly bytes: number; readonly answer?: string }>;

async function imageUnit(session: ort.InferenceSession, work: FloorImageWork): Promise<Unit> {
  const { imageToTensor } = await import('@visionserve/vision/image');
  const labels: Labels | undefined =
    work.labelsText !== undefined && work.postprocess.labels !== undefined
      ? parseLabels(work.labelsText, work.postprocess.labels, work.postprocess.labelsFormat)
      : undefined;
  return async () => {
    const { tensor } = await imageToTensor(work.bytes, work.image);
    const out = await session.run({ [work.input]: toOrt(tensor.dtype, tensor.shape, tensor.data) }, [
      work.output,
    ]);
    const predictions = classifyTopK(fromOrt(out[work.output]!), work.postprocess, labels);
    const answer = JSON.stringify({ predictions });
    return { bytes: Buffer.byteLength(answer), answer };
  };
}

async function main(): Promise<void> {
  let unit: Unit;
  try {
    const session = await ort.InferenceSession.create(init.modelPath, ortSessionOptions(init.settings));
    if (init.imageWork) unit = await imageUnit(session, init.imageWork);
    else {
      const feeds: Record<string, ort.Tensor> = {};
      for (const feed of init.feeds) feeds[feed.name] = toOrt(feed.dtype, feed.shape, feed.data);
      unit = async () => {
        const out = await session.run(feeds);
        let bytes = 0;
        for (const t of Object.values(out)) bytes += (t.data as ArrayBufferView).byteLength;
        return { bytes };
      };
    }
  } catch (error) {
    port!.postMessage({
      type: 'failed',
      message: error instanceof Error ? error.message : String(error),
    } satisfies FromFloorWorker);
    return;
  }
  port!.postMessage({ type: 'ready' } satisfies FromFloorWorker);
  port!.on('message', (request: FloorRequest) => {
    void (async () => {
      try {
        for (let i = 0; i < request.warmup; i++) await unit();
        const latencies: number[] = [];
        let last: Awaited<ReturnType<Unit>> = { bytes: 0 };
        const start = performance.now();
        while (
          latencies.length < request.minRuns ||
          (latencies.length < request.maxRuns && performance.now() - start < request.durationMs)
        ) {
          const t0 = performance.now();
          last = await unit();
          latencies.push(performance.now() - t0);
        }
        port!.postMessage({
          type: 'latencies',
          latencies,
          resultBytes: last.bytes,
          answer: last.answer,
        } satisfies FromFloorWorker);
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
