/**
 * Worker-thread entry: owns one onnxruntime InferenceSession. `session.run` is
 * a blocking native call, so it must never run on the main thread.
 *
 * Started with `workerData` (the WorkerInit), it loads at once. Started without (a spare,
 * see spare-inference-workers.ts), it boots, loads onnxruntime and waits for a `load`
 * message carrying the WorkerInit (or `close`: it then exits).
 *
 * Protocol (see wire-tensor.ts): after start it posts `ready` (with every model file's
 * metadata) or `load-failed`; then answers each `run` with `result` or `run-failed`
 * carrying the same id. Runs are handled one at a time in arrival order.
 */
import { readFile } from 'node:fs/promises';
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { allocate, type DType, type NumericArray } from '@visionserve/protocol';
import type { FromWorker, ToWorker, WireModel, WireSpec, WireTensor, WorkerInit } from './wire-tensor.js';
import { ownedBuffer, tensorFromWire } from './wire-tensor.js';
import { discardNow, spentBuffers } from './discard-buffers.js';
import { createOutputSlotPool } from './output-slot-pool.js';
import { ortSessionOptions } from './session-options.js';
import { lowerThreadPriority } from './thread-priority.js';
import { createNativeCallState, nativeCall } from './native-call-guard.js';

const port = parentPort;
if (!port) throw new Error('onnx-worker must run in a worker thread');
const spare = workerData === undefined || workerData === null;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function post(message: FromWorker, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

function specOf(meta: ort.InferenceSession.ValueMetadata, unknownRank: ReadonlySet<string>): WireSpec {
  if (!meta.isTensor) return { name: meta.name, type: 'non-tensor', shape: undefined };
  return {
    name: meta.name,
    type: meta.type,
    shape: unknownRank.has(meta.name) ? undefined : meta.shape.map((d) => d),
  };
}

/**
 * onnxruntime reports a tensor of unknown rank with shape [] like a scalar; the model file
 * tells them apart (no shape at all vs an empty one). Read only when some value is ambiguous.
 */
async function unknownRankValues(session: ort.InferenceSession, path: string): Promise<Set<string>> {
  const all = [...session.inputMetadata, ...session.outputMetadata];
  if (!all.some((m) => m.isTensor && m.shape.length === 0)) return new Set();
  try {
    // Loaded only here: the ONNX protobuf schema costs every worker's start-up otherwise.
    const { readOnnxModelInfo } = await import('@visionserve/protocol/onnx');
    const info = readOnnxModelInfo(await readFile(path));
    return new Set([...info.inputs, ...info.outputs].filter((v) => v.dims === undefined).map((v) => v.name));
  } catch {
    return new Set(); // onnxruntime loaded it; keep its view (scalars) rather than fail the load.
  }
}

/** An onnxruntime tensor over the wire tensor's bytes (a view; a copy only when misaligned). */
function toOrt(t: WireTensor): ort.Tensor {
  if (t.dtype === 'string') {
    return new ort.Tensor(
      'string',
      t.strings.map((b) => decoder.decode(b)),
      t.shape,
    );
  }
  if (t.dtype === 'bfloat16') throw new Error('bfloat16 tensors are not supported by onnxruntime-node');
  // Our dtype names are onnxruntime's; bool is one byte per element in both.
  const data = tensorFromWire(t).data as Exclude<ort.Tensor['data'], string[]>;
  return new ort.Tensor(t.dtype, data, t.shape);
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

/** Outputs at least this large are lent from the pool when the run allows it. */
export const LEND_MIN_BYTES = 1024 * 1024;
/**
 * Most bytes of shared buffers one worker pools: room for three 36 MB responses in flight
 * per instance; outputs that find no free slot within it are moved as before.
 */
const POOL_MAX_BYTES = 128 * 1024 * 1024;
/** A slot free for this long is dropped (its memory goes back after a burst), in ms. */
const POOL_IDLE_MS = 30_000;

/** The worker's output slots: busy from the run that fills one until the server's `release`. */
const pool = createOutputSlotPool({ maxBytes: POOL_MAX_BYTES, idleMs: POOL_IDLE_MS });
setInterval(() => {
  pool.trim();
}, POOL_IDLE_MS / 3).unref();

/** Slots taken by the run in progress, until its result is posted: freed again when it fails. */
let takenByRun: number[] = [];

function takeSlot(byteLength: number): number | undefined {
  const slot = pool.take(byteLength);
  if (slot !== undefined) takenByRun.push(slot);
  return slot;
}

/**
 * The wire form of an output: a large one copied into a lent slot (its own buffer then goes
 * into `copied`), any other moved with the result (its buffer into `transfer`).
 */
function fromOrt(
  name: string,
  t: ort.Tensor,
  transfer: ArrayBuffer[],
  copied: Set<ArrayBuffer>,
  lend: boolean,
): WireTensor {
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
  const slot = lend && data.byteLength >= LEND_MIN_BYTES ? takeSlot(data.byteLength) : undefined;
  if (slot !== undefined) {
    const sab = pool.buffer(slot);
    new Uint8Array(sab, 0, data.byteLength).set(
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    );
    if (data.buffer instanceof ArrayBuffer) copied.add(data.buffer);
    return { name, dtype, shape, buffer: sab, byteOffset: 0, byteLength: data.byteLength, slot };
  }
  const buffer = ownedBuffer(data);
  transfer.push(buffer);
  return { name, dtype, shape, buffer, byteOffset: 0, byteLength: buffer.byteLength };
}

async function main(init: WorkerInit): Promise<void> {
  // Before the sessions exist: onnxruntime's own threads inherit it.
  lowerThreadPriority(init.threadNice ?? 0);
  // Every onnxruntime call that runs native code goes through `native`: a stop asked meanwhile
  // waits for it to return (terminating the thread inside one aborts the whole process).
  const state = init.nativeState ?? createNativeCallState();
  const native = <T>(call: () => Promise<T>): Promise<T> => nativeCall(state, call);
  const sessions = new Map<string, ort.InferenceSession>();
  /** One at a time: native calls never overlap (nativeCall refuses a second one). */
  const releaseAll = async (): Promise<void> => {
    for (const s of sessions.values()) await native(() => s.release());
  };
  try {
    for (const model of init.models) {
      const options = ortSessionOptions(init);
      sessions.set(model.key, await native(() => ort.InferenceSession.create(model.path, options)));
    }
  } catch (error) {
    await releaseAll();
    post({ type: 'load-failed', message: error instanceof Error ? error.message : String(error) });
    return;
  }
  const first = sessions.values().next().value!;
  const ready: WireModel[] = [];
  for (const model of init.models) {
    const session = sessions.get(model.key)!;
    const unknownRank = await unknownRankValues(session, model.path);
    ready.push({
      key: model.key,
      inputs: session.inputMetadata.map((m) => specOf(m, unknownRank)),
      outputs: session.outputMetadata.map((m) => specOf(m, unknownRank)),
    });
  }
  post({
    type: 'ready',
    models: ready,
  });

  // Runs execute strictly one after another: the next message is only handled after the
  // previous run settled. `close` waits for the run in progress: terminating the thread
  // inside session.run would abort the whole process.
  let chain = Promise.resolve();
  port!.on('message', (message: ToWorker) => {
    if (message.type === 'close') {
      chain = chain
        .then(async () => {
          await releaseAll();
        })
        .finally(() => {
          port!.close();
        });
      return;
    }
    if (message.type === 'release') {
      for (const slot of message.slots) pool.free(slot);
      return;
    }
    if (message.type !== 'run') return; // a second `load` is not part of the protocol
    chain = chain.then(async () => {
      takenByRun = [];
      // Outputs copied into slots: their own buffers are garbage from then on.
      const copied = new Set<ArrayBuffer>();
      try {
        const session = message.model === undefined ? first : sessions.get(message.model);
        if (session === undefined) throw new Error(`no model file ${message.model ?? ''} in this worker`);
        const feeds: Record<string, ort.Tensor> = {};
        for (const t of message.inputs) feeds[t.name] = toOrt(t);
        const started = performance.now();
        const { outputNames } = message;
        const results = await native(() =>
          outputNames === undefined ? session.run(feeds) : session.run(feeds, [...outputNames]),
        );
        const computeMs = performance.now() - started;
        const transfer: ArrayBuffer[] = [];
        const outputs = Object.entries(results).map(([name, t]) =>
          fromOrt(name, t, transfer, copied, message.lend === true),
        );
        post({ type: 'result', id: message.id, outputs, computeMs }, transfer);
        // Delivered: from now on only the server's `release` frees them.
        takenByRun = [];
        // After `post`: an output moved with the result is detached by then and skipped here.
        discardNow(spentBuffers(message.inputs, copied));
      } catch (error) {
        for (const slot of takenByRun) pool.free(slot);
        takenByRun = [];
        discardNow(spentBuffers(message.inputs, copied));
        post({
          type: 'run-failed',
          id: message.id,
          message: error instanceof Error ? error.message : String(error),
        });
      }
    });
  });
}

if (!spare) {
  void main(workerData as WorkerInit);
} else {
  port.once('message', (message: ToWorker) => {
    if (message.type === 'load') void main(message.init);
    else port.close();
  });
}
