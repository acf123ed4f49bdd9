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
import { abortError } from '../core/abort-error.js';

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

interface Invocation {
  readonly id: number;
  readonly request: HandlerInvocation;
  readonly bridge: HandlerBridge;
  readonly signal: AbortSignal | undefined;
  /** Aborts bridged calls (predict, model server) of this invocation. */
  readonly calls: AbortController;
  readonly resolve: (result: HandlerResult) => void;
  readonly reject: (error: ServingError) => void;
  readonly onAbort: () => void;
  instance: Instance | undefined;
  settled: boolean;
}

interface Instance {
  readonly worker: Worker;
  readonly active: Map<number, Invocation>;
  /** Module paths this worker has imported. */
  readonly modules: Set<string>;
  /** No new work; terminated once idle. */
  retiring: boolean;
  alive: boolean;
}

/**
 * Hosts user handler modules in a pool of worker threads (see handler-worker.ts),
 * so a slow or CPU-bound handler never blocks the main event loop. Invocations
 * queue FIFO when every worker is at `concurrencyPerWorker`.
 *
 * Failure isolation: an invocation whose deadline passes (its signal aborts with
 * DEADLINE_EXCEEDED) terminates its worker, since a spinning handler cannot be
 * interrupted otherwise; other invocations on that worker fail with INTERNAL. A
 * worker that crashes or runs out of heap fails only its own invocations. Workers
 * are replaced on demand.
 */
export function createHandlerHost(options: HandlerHostOptions): HandlerHost {
  const size = Math.max(1, options.workers ?? 2);
  const perWorker = Math.max(1, options.concurrencyPerWorker ?? 1);
  const maxHeapMb = options.maxHeapMb ?? 1024;
  const log = options.logger;
  const instances: Instance[] = [];
  const queue: Invocation[] = [];
  let nextId = 1;
  let closed = false;

  const settle = (inv: Invocation, outcome: { result: HandlerResult } | { error: ServingError }): void => {
    if (inv.settled) return;
    inv.settled = true;
    inv.signal?.removeEventListener('abort', inv.onAbort);
    inv.calls.abort(new ServingError(Code.CANCELLED, 'Handler invocation finished'));
    if (inv.instance !== undefined) {
      inv.instance.active.delete(inv.id);
      const instance = inv.instance;
      if (instance.retiring && instance.active.size === 0) void terminate(instance);
    }
    if ('result' in outcome) inv.resolve(outcome.result);
    else inv.reject(outcome.error);
  };

  const terminate = async (instance: Instance): Promise<void> => {
    instance.retiring = true;
    const index = instances.indexOf(instance);
    if (index >= 0) instances.splice(index, 1);
    await instance.worker.terminate();
  };

  const post = (instance: Instance, message: ToHandlerWorker, transfer: ArrayBuffer[] = []): void => {
    if (instance.alive) instance.worker.postMessage(message, transfer);
  };

  const onMessage = (instance: Instance, message: FromHandlerWorker): void => {
    const inv = instance.active.get(message.id);
    if (inv === undefined) return; // abandoned (cancelled) invocation
    switch (message.type) {
      case 'done':
        settle(inv, { result: { body: new Uint8Array(message.body), contentType: message.contentType } });
        return;
      case 'failed':
        settle(inv, { error: new ServingError(Code.INTERNAL, message.message) });
        return;
      case 'predict': {
        const { callId } = message;
        const inputs: Record<string, Tensor> = {};
        for (const t of message.inputs) inputs[t.name] = tensorFromWire(t);
        inv.bridge.predict(inputs, message.options, inv.calls.signal).then(
          (outputs) => {
            const transfer: ArrayBuffer[] = [];
            const wire = Object.entries(outputs).map(([name, t]) => toWire(name, t, transfer));
            post(instance, { type: 'predict-result', id: inv.id, callId, outputs: wire }, transfer);
          },
          (error: unknown) => {
            const e = toServingError(error);
            post(instance, { type: 'call-error', id: inv.id, callId, code: e.code, message: e.message });
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
              instance,
              {
                type: 'model-server-result',
                id: inv.id,
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
            post(instance, { type: 'call-error', id: inv.id, callId, code: e.code, message: e.message });
          },
        );
        return;
      }
    }
  };

  const failAll = (instance: Instance, error: ServingError): void => {
    for (const inv of [...instance.active.values()]) settle(inv, { error });
  };

  const spawn = (): Instance => {
    const worker = new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: maxHeapMb } });
    const instance: Instance = {
      worker,
      active: new Map(),
      modules: new Set(),
      retiring: false,
      alive: true,
    };
    worker.on('message', (message: FromHandlerWorker) => {
      onMessage(instance, message);
    });
    worker.on('error', (error) => {
      log.error('handler worker failed', { error });
      failAll(instance, new ServingError(Code.INTERNAL, `Handler worker crashed: ${error.message}`));
    });
    worker.on('exit', (code) => {
      instance.alive = false;
      const index = instances.indexOf(instance);
      if (index >= 0) instances.splice(index, 1);
      if (instance.active.size > 0) {
        log.warn('handler worker exited with invocations in flight', { code });
        failAll(instance, new ServingError(Code.INTERNAL, 'Handler worker stopped'));
      }
      dispatch();
    });
    worker.unref();
    instances.push(instance);
    return instance;
  };

  const dispatch = (): void => {
    while (queue.length > 0 && !closed) {
      let target: Instance | undefined;
      for (const i of instances) {
        if (!i.alive || i.retiring || i.active.size >= perWorker) continue;
        if (target === undefined || i.active.size < target.active.size) target = i;
      }
      if (target === undefined) {
        if (instances.filter((i) => !i.retiring).length >= size) return;
        target = spawn();
      }
      const inv = queue.shift()!;
      inv.instance = target;
      target.active.set(inv.id, inv);
      target.modules.add(inv.request.modulePath);
      const body = ownedBuffer(inv.request.body);
      post(
        target,
        {
          type: 'invoke',
          id: inv.id,
          modulePath: inv.request.modulePath,
          body,
          context: inv.request.context,
        },
        [body],
      );
    }
  };

  return {
    invoke(request, bridge, signal) {
      if (closed) return Promise.reject(new ServingError(Code.UNAVAILABLE, 'Handler host is closed'));
      if (signal?.aborted) return Promise.reject(abortError(signal));
      return new Promise<HandlerResult>((resolve, reject) => {
        const inv: Invocation = {
          id: nextId++,
          request,
          bridge,
          signal,
          calls: new AbortController(),
          resolve,
          reject,
          instance: undefined,
          settled: false,
          onAbort: () => {
            const reason = abortError(signal!);
            const index = queue.indexOf(inv);
            if (index >= 0) queue.splice(index, 1);
            const instance = inv.instance;
            settle(inv, { error: reason });
            if (instance !== undefined && reason.code === Code.DEADLINE_EXCEEDED && instance.alive) {
              // The handler may be spinning: only terminating its thread stops it.
              log.warn('handler exceeded its deadline; restarting its worker', {
                module: request.modulePath,
              });
              failAll(
                instance,
                new ServingError(Code.INTERNAL, 'Handler worker restarted after another request timed out'),
              );
              void terminate(instance);
            }
          },
        };
        signal?.addEventListener('abort', inv.onAbort, { once: true });
        queue.push(inv);
        dispatch();
      });
    },

    forget(directory) {
      const prefix = directory.endsWith(sep) ? directory : directory + sep;
      for (const instance of [...instances]) {
        if (![...instance.modules].some((m) => m.startsWith(prefix))) continue;
        instance.retiring = true;
        if (instance.active.size === 0) void terminate(instance);
      }
    },

    async close() {
      closed = true;
      for (const inv of queue.splice(0)) {
        settle(inv, { error: new ServingError(Code.UNAVAILABLE, 'Server is shutting down') });
      }
      const all = [...instances];
      for (const instance of all) {
        failAll(instance, new ServingError(Code.UNAVAILABLE, 'Server is shutting down'));
      }
      await Promise.all(all.map((i) => terminate(i)));
    },
  };
}
