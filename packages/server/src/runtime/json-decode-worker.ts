/**
 * A JSON decode thread (see json-decode-pool.ts): reads JSON tensor bodies (TF Serving
 * predict, SageMaker JSON, KServe v2 inference requests) with the fast numeric reader and
 * sends the tensors' arrays back (transferred). A body the
 * reader does not take is answered `undefined`: the main thread then parses it itself.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThreadPriority } from './thread-priority.js';
import { fastBodyToMessage, readFastJsonBody } from '@visionserve/protocol';
import type { FromDecodeWorker, ToDecodeWorker } from './json-decode-messages.js';

const port = parentPort;
if (port === null) throw new Error('json-decode-worker.js runs as a worker thread');
lowerThreadPriority((workerData as { nice?: number } | null)?.nice ?? 0);

port.on('message', (job: ToDecodeWorker) => {
  const started = performance.now();
  let reply: FromDecodeWorker;
  let transfer: ArrayBuffer[] = [];
  try {
    const body = readFastJsonBody(job.format, job.bytes);
    if (body === undefined) {
      reply = { id: job.id, ms: performance.now() - started, body: undefined };
    } else {
      const moved = fastBodyToMessage(body);
      transfer = moved.transfer;
      reply = { id: job.id, ms: performance.now() - started, body: moved.message };
    }
  } catch (error) {
    // The reader refuses nothing by throwing; whatever got here, the main thread's general
    // path gives the body its proper answer.
    reply = {
      id: job.id,
      ms: performance.now() - started,
      body: undefined,
      failure: error instanceof Error ? error.message : String(error),
    };
  }
  port.postMessage(reply, transfer);
});
