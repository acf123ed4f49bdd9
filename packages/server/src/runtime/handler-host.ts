import { Worker } from 'node:worker_threads';
import { sep } from 'node:path';
import { Code, ServingError, toServingError, type Tensor } from '@visionserve/protocol';
import type {
  HandlerBridge,
  HandlerHost,
  HandlerInvocation,
  HandlerResult,
} from '../contracts/handler-host.js';
import type { Logger } from '../util/logger.js';
import type { FromHandlerWorker, ToHandlerWorker } from './handler-messages.js';
import { ownedBuffer, tensorFromWire, toWire } from './wire-tensor.js';
import { createWorkerPool } from './worker-pool.js';

export interface HandlerHostOptions {
  /** Worker threads running handler code; started on first use. Default 2. */
  readonly workers?: number;
  /** Invocations one worker runs at a time (they interleave at `await`s). Default 1. */
  readonly concurrencyPerWorker?: number;
  /** V8 old-generation heap cap of each worker, in MiB; a worker over it dies alone. Default 1024. */
  readonly maxHeapMb?: number;
  readonly logger: Logger;
}

const WORKER_URL = new URL('./handler-worker.js', import.meta.url);

/** One invocation as the pool carries it. */
interface Invocation {
  readonly request: HandlerInvocation;
  readonly bridge: HandlerBridge;
  /** Aborts bridged calls (predict, model server) of this invocation once it is answered. */
  readonly calls: AbortController;
}

/**
 * Hosts user handler modules in a pool of worker threads (see handler-worker.ts and
 * worker-pool.ts), so a slow or CPU-bound handler never blocks the main event loop.
 * Invocations queue FIFO when every worker is at `concurrencyPerWorker`.
 *
 * Failure isolation: an invocation whose deadline passes (its signal aborts with
 * DEADLINE_EXCEEDED) stops its worker, since a spinning handler cannot be interrupted
 * otherwise (handler workers run plain JavaScript, so terminating them is safe); other
 * invocations on that worker fail with INTERNAL. A worker that crashes or runs out of heap
 * fails only its own invocations. Workers start on demand.
 */
export function createHandlerHost(options: HandlerHostOptions): HandlerHost {
  const maxHeapMb = options.maxHeapMb ?? 1024;
  const log = options.logger;

  const post = (worker: Worker, message: ToHandlerWorker, transfer: ArrayBuffer[] = []): void => {
    worker.postMessage(message, transfer);
  };

  const pool = createWorkerPool<Invocation>({
    size: Math.max(1, options.workers ?? 2),
    concurrencyPerWorker: Math.max(1, options.concurrencyPerWorker ?? 1),
    maxQueued: 10_000,
    keepAlive: false,
    spawn: () => {
      const worker = new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: maxHeapMb } });
      worker.unref();
      return Promise.resolve(worker);
    },
    post: (worker, id, inv) => {
      const body = ownedBuffer(inv.request.body);
      post(
        worker,
        { type: 'invoke', id, modulePath: inv.request.modulePath, body, context: inv.request.context },
        [body],
      );
    },
    onMessage: (from, raw) => {
      const message = raw as FromHandlerWorker;
      const inv = from.job(message.id);
      if (inv === undefined) return; // abandoned (cancelled) invocation
      const { id } = message;
      switch (message.type) {
        case 'done':
          from.settle(id, {
            value: { body: new Uint8Array(message.body), contentType: message.contentType },
          });
          return;
        case 'failed':
          from.settle(id, { error: new ServingError(Code.INTERNAL, message.message) });
          return;
        case 'predict': {
          const { callId } = message;
          const inputs: Record<string, Tensor> = {};
          for (const t of message.inputs) inputs[t.name] = tensorFromWire(t);
          inv.bridge.predict(inputs, message.options, inv.calls.signal).then(
            (outputs) => {
              const transfer: ArrayBuffer[] = [];
              const wire = Object.entries(outputs).map(([name, t]) => toWire(name, t, transfer));
              post(from.worker, { type: 'predict-result', id, callId, outputs: wire }, transfer);
            },
            (error: unknown) => {
              const e = toServingError(error);
              post(from.worker, { type: 'call-error', id, callId, code: e.code, message: e.message });
            },
          );
          return;
        }
        case 'model-server': {
          const { callId } = message;
          inv.bridge.modelServer(new Uint8Array(message.body), inv.calls.signal).then(
            (response) => {
              const body = ownedBuffer(response.body);
              post(
                from.worker,
                {
                  type: 'model-server-result',
                  id,
                  callId,
                  status: response.status,
                  headers: response.headers,
                  body,
                },
                [body],
              );
            },
            (error: unknown) => {
              const e = toServingError(error);
              post(from.worker, { type: 'call-error', id, callId, code: e.code, message: e.message });
            },
          );
          return;
        }
      }
    },
    stop: async (worker) => {
      await worker.terminate();
    },
    // The handler may be spinning: only stopping its thread stops it.
    stopOnAbort: (reason) => reason.code === Code.DEADLINE_EXCEEDED,
    logger: log,
  });

  return {
    async invoke(request, bridge, signal) {
      const calls = new AbortController();
      try {
        return await pool.submit<HandlerResult>(
          { request, bridge, calls },
          { signal, tag: request.modulePath },
        );
      } finally {
        calls.abort(new ServingError(Code.CANCELLED, 'Handler invocation ended'));
      }
    },

    forget(directory) {
      const prefix = directory.endsWith(sep) ? directory : directory + sep;
      pool.retire((modulePath) => modulePath.startsWith(prefix));
    },

    close() {
      return pool.close(0);
    },
  };
}
