/**
 * Worker-thread entry: owns one onnxruntime InferenceSession. `session.run` is
 * a blocking native call, so it must never run on the main thread.
 *
 * Protocol (see wire-tensor.ts): after start it posts `ready` or `load-failed`;
 * then answers each `run` with `result` or `run-failed` carrying the same id.
 * Runs are handled one at a time in arrival order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { allocate, type DType, type NumericArray } from '@visionserve/protocol';
import type { FromWorker, ToWorker, WireSpec, WireTensor } from './wire-tensor.js';
import { ownedBuffer } from './wire-tensor.js';
import { ortSessionOptions } from './session-options.js';

export interface WorkerInit {
  readonly modelPath: string;
  readonly intraOpThreads: number;
  readonly interOpThreads: number;
  readonly allowSpinning: boolean;
}

const port = parentPort;
if (!port) throw new Error('onnx-worker must run in a worker thread');
const init = workerData as WorkerInit;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function post(message: FromWorker, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

function specOf(meta: ort.InferenceSession.ValueMetadata): WireSpec {
  if (!meta.isTensor) return { name: meta.name, type: 'non-tensor', shape: undefined };
  return {
    name: meta.name,
    type: meta.type,
    shape: meta.shape.map((d) => d),
  };
}

function toOrt(t: WireTensor): ort.Tensor {
  if (t.dtype === 'string') {
    return new ort.Tensor(
      'string',
      t.strings.map((b) => decoder.decode(b)),
      t.shape,
    );
  }
  const dims = t.shape;
  switch (t.dtype) {
    case 'float32':
      return new ort.Tensor('float32', new Float32Array(t.buffer), dims);
    case 'float64':
      return new ort.Tensor('float64', new Float64Array(t.buffer), dims);
    case 'float16':
      return new ort.Tensor('float16', new Uint16Array(t.buffer), dims);
    case 'int8':
      return new ort.Tensor('int8', new Int8Array(t.buffer), dims);
    case 'int16':
      return new ort.Tensor('int16', new Int16Array(t.buffer), dims);
    case 'int32':
      return new ort.Tensor('int32', new Int32Array(t.buffer), dims);
    case 'int64':
      return new ort.Tensor('int64', new BigInt64Array(t.buffer), dims);
    case 'uint8':
      return new ort.Tensor('uint8', new Uint8Array(t.buffer), dims);
    case 'uint16':
      return new ort.Tensor('uint16', new Uint16Array(t.buffer), dims);
    case 'uint32':
      return new ort.Tensor('uint32', new Uint32Array(t.buffer), dims);
    case 'uint64':
      return new ort.Tensor('uint64', new BigUint64Array(t.buffer), dims);
    case 'bool':
      return new ort.Tensor('bool', new Uint8Array(t.buffer), dims);
    case 'bfloat16':
      throw new Error('bfloat16 tensors are not supported by onnxruntime-node');
  }
}

const ORT_TO_DTYPE: Readonly<Record<string, DType>> = {
  float32: 'float32',
  float64: 'float64',
  float16: 'float16',
  int8: 'int8',
  int16: 'int16',
  int32: 'int32',
  int64: 'int64',
  uint8: 'uint8',
  uint16: 'uint16',
  uint32: 'uint32',
  uint64: 'uint64',
  bool: 'bool',
  string: 'string',
};

function fromOrt(name: string, t: ort.Tensor, transfer: ArrayBuffer[]): WireTensor {
  const dtype = ORT_TO_DTYPE[t.type];
  if (dtype === undefined) throw new Error(`output ${name} has unsupported type ${t.type}`);
  const shape = t.dims.slice();
  if (dtype === 'string') {
    return { name, dtype, shape, strings: (t.data as string[]).map((s) => encoder.encode(s)) };
  }
  let data = t.data as NumericArray;
  if (dtype === 'bool' && !(data instanceof Uint8Array)) {
    const bytes = allocate('bool', data.length);
    for (let i = 0; i < data.length; i++) bytes[i] = data[i] ? 1 : 0;
    data = bytes;
  }
  const buffer = ownedBuffer(data);
  transfer.push(buffer);
  return { name, dtype, shape, buffer };
}

async function main(): Promise<void> {
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(init.modelPath, ortSessionOptions(init));
  } catch (error) {
    post({ type: 'load-failed', message: error instanceof Error ? error.message : String(error) });
    return;
  }
  post({
    type: 'ready',
    inputs: session.inputMetadata.map(specOf),
    outputs: session.outputMetadata.map(specOf),
  });

  // Runs execute strictly one after another: the next message is only handled
  // after the previous run settled (the main side never sends more than one anyway).
  let chain = Promise.resolve();
  port!.on('message', (message: ToWorker) => {
    if (message.type === 'close') {
      chain = chain
        .then(() => session.release())
        .then(() => {
          port!.close();
        });
      return;
    }
    chain = chain.then(async () => {
      try {
        const feeds: Record<string, ort.Tensor> = {};
        for (const t of message.inputs) feeds[t.name] = toOrt(t);
        const results =
          message.outputNames === undefined
            ? await session.run(feeds)
            : await session.run(feeds, [...message.outputNames]);
        const transfer: ArrayBuffer[] = [];
        const outputs = Object.entries(results).map(([name, t]) => fromOrt(name, t, transfer));
        post({ type: 'result', id: message.id, outputs }, transfer);
      } catch (error) {
        post({
          type: 'run-failed',
          id: message.id,
          message: error instanceof Error ? error.message : String(error),
        });
      }
    });
  });
}

void main();
