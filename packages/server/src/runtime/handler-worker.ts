/**
 * Worker-thread entry that runs user handler modules (`code/inference.js` of a
 * model) so that slow or CPU-heavy user code never blocks the server's event
 * loop. Protocol: handler-messages.ts. Several invocations may be in flight in
 * one worker when the host allows it; each is independent.
 *
 * The module contract (the SageMaker TFS container's inference.py, in JS):
 *   - `handler(data, context)` returns `[body, contentType]`; or
 *   - `inputHandler(data, context)` returns the TF Serving REST request body, which
 *     the server runs; `outputHandler(response, context)` gets `{status, headers,
 *     body, text(), json()}` and returns `[body, contentType]`.
 *   snake_case names (`input_handler`, `output_handler`) are accepted; a missing
 *   inputHandler passes the request body through, a missing outputHandler returns
 *   the model server's body as application/json (or throws on a non-200 status).
 */
import { parentPort } from 'node:worker_threads';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Tensor } from '@visionserve/protocol';
import type { HandlerContextData, HandlerPredictOptions } from '../contracts/handler-host.js';
import type { FromHandlerWorker, ToHandlerWorker } from './handler-messages.js';
import { ownedBuffer, tensorFromWire, toWire } from './wire-tensor.js';

const port = parentPort;
if (!port) throw new Error('handler-worker must run in a worker thread');

type UserFunction = (...args: unknown[]) => unknown;

interface HandlerModule {
  readonly handler: UserFunction | undefined;
  readonly inputHandler: UserFunction | undefined;
  readonly outputHandler: UserFunction | undefined;
}

/** Error with a canonical code, as thrown by context.predict (mirrors ServingError's fields). */
class BridgeError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'ServingError';
  }
}

const modules = new Map<string, Promise<HandlerModule>>();

function pick(ns: Record<string, unknown>, names: readonly string[]): UserFunction | undefined {
  const fallback = ns['default'];
  for (const name of names) {
    const direct = ns[name];
    if (typeof direct === 'function') return direct as UserFunction;
    if ((typeof fallback === 'object' && fallback !== null) || typeof fallback === 'function') {
      const nested = (fallback as Record<string, unknown>)[name];
      if (typeof nested === 'function') return nested as UserFunction;
    }
  }
  return undefined;
}

function loadModule(modulePath: string): Promise<HandlerModule> {
  let loaded = modules.get(modulePath);
  if (loaded === undefined) {
    loaded = import(pathToFileURL(modulePath).href).then((ns: Record<string, unknown>) => {
      const mod: HandlerModule = {
        handler: pick(ns, ['handler']),
        inputHandler: pick(ns, ['inputHandler', 'input_handler']),
        outputHandler: pick(ns, ['outputHandler', 'output_handler']),
      };
      if (mod.handler === undefined && mod.inputHandler === undefined && mod.outputHandler === undefined) {
        throw new Error(
          'the handler module exports neither handler(data, context) nor inputHandler/outputHandler',
        );
      }
      return mod;
    });
    // A module that failed to load is retried on the next invocation.
    loaded.catch(() => modules.delete(modulePath));
    modules.set(modulePath, loaded);
  }
  return loaded;
}

function post(message: FromHandlerWorker, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

const encoder = new TextEncoder();

/** Bytes of a user-returned body: string (UTF-8), bytes, or anything else as JSON. */
function toBytes(value: unknown, what: string): Uint8Array {
  if (typeof value === 'string') return encoder.encode(value);
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value === undefined) throw new Error(`${what} returned nothing`);
  return encoder.encode(JSON.stringify(value));
}

function bufferOf(bytes: Uint8Array): ArrayBuffer {
  return ownedBuffer(bytes);
}

type Reply =
  | { readonly type: 'predict'; readonly outputs: Record<string, Tensor> }
  | {
      readonly type: 'model-server';
      readonly status: number;
      readonly headers: Record<string, string>;
      readonly body: Buffer;
    };

interface PendingCall {
  resolve(reply: Reply): void;
  reject(error: Error): void;
}

/** Bridged calls in flight, by invocation id then call id. */
const calls = new Map<number, Map<number, PendingCall>>();
let nextCallId = 1;

function bridgeCall(id: number, send: (callId: number) => void): Promise<Reply> {
  return new Promise<Reply>((resolve, reject) => {
    const callId = nextCallId++;
    let perInvocation = calls.get(id);
    if (perInvocation === undefined) {
      perInvocation = new Map();
      calls.set(id, perInvocation);
    }
    perInvocation.set(callId, { resolve, reject });
    send(callId);
  });
}

function makeContext(id: number, data: HandlerContextData): Record<string, unknown> {
  return {
    ...data,
    /**
     * In-process predict against the request's model (or `options.modelName`).
     * Ownership of the input buffers passes to the server (they are transferred).
     */
    async predict(inputs: Record<string, Tensor>, options: HandlerPredictOptions = {}) {
      const transfer: ArrayBuffer[] = [];
      const wire = Object.entries(inputs).map(([name, t]) => toWire(name, t, transfer));
      const reply = await bridgeCall(id, (callId) => {
        post({ type: 'predict', id, callId, inputs: wire, options: { ...options } }, transfer);
      });
      if (reply.type !== 'predict') throw new Error('unexpected reply');
      return reply.outputs;
    },
  };
}

function modelServerResponse(reply: Reply): Record<string, unknown> {
  if (reply.type !== 'model-server') throw new Error('unexpected reply');
  const { status, headers, body } = reply;
  return {
    status,
    headers,
    body,
    text: () => body.toString('utf8'),
    json: (): unknown => JSON.parse(body.toString('utf8')),
  };
}

function resultTuple(value: unknown, what: string): { body: Uint8Array; contentType: string } {
  if (!Array.isArray(value) || value.length !== 2 || typeof value[1] !== 'string') {
    throw new Error(`${what} must return [body, contentType]`);
  }
  return { body: toBytes(value[0], what), contentType: value[1] };
}

async function invoke(id: number, modulePath: string, body: Buffer, data: HandlerContextData): Promise<void> {
  const mod = await loadModule(modulePath);
  const context = makeContext(id, data);
  let result: { body: Uint8Array; contentType: string };
  if (mod.handler !== undefined) {
    result = resultTuple(await mod.handler(body, context), 'handler');
  } else {
    const request =
      mod.inputHandler === undefined ? body : toBytes(await mod.inputHandler(body, context), 'inputHandler');
    const requestBuffer = bufferOf(request);
    const reply = await bridgeCall(id, (callId) => {
      post({ type: 'model-server', id, callId, body: requestBuffer }, [requestBuffer]);
    });
    const response = modelServerResponse(reply);
    if (mod.outputHandler !== undefined) {
      result = resultTuple(await mod.outputHandler(response, context), 'outputHandler');
    } else {
      if (response['status'] !== 200) {
        throw new Error((response['text'] as () => string)());
      }
      result = { body: response['body'] as Buffer, contentType: 'application/json' };
    }
  }
  const out = bufferOf(result.body);
  post({ type: 'done', id, body: out, contentType: result.contentType }, [out]);
}

/** Error text for the client: the message only, with the model directory path removed. */
function describe(error: unknown, modulePath: string): string {
  const message = error instanceof Error ? error.message : String(error);
  const dir = dirname(dirname(modulePath));
  return message.split(pathToFileURL(dir).href).join('<model>').split(dir).join('<model>');
}

port.on('message', (message: ToHandlerWorker) => {
  switch (message.type) {
    case 'invoke': {
      const { id, modulePath } = message;
      invoke(id, modulePath, Buffer.from(message.body), message.context)
        .catch((error: unknown) => {
          post({ type: 'failed', id, message: describe(error, modulePath) });
        })
        .finally(() => {
          calls.delete(id);
        });
      return;
    }
    case 'predict-result':
    case 'model-server-result':
    case 'call-error': {
      const pending = calls.get(message.id)?.get(message.callId);
      if (pending === undefined) return;
      calls.get(message.id)!.delete(message.callId);
      if (message.type === 'call-error') pending.reject(new BridgeError(message.code, message.message));
      else if (message.type === 'predict-result') {
        const outputs: Record<string, Tensor> = {};
        for (const t of message.outputs) outputs[t.name] = tensorFromWire(t);
        pending.resolve({ type: 'predict', outputs });
      } else {
        pending.resolve({
          type: 'model-server',
          status: message.status,
          headers: { ...message.headers },
          body: Buffer.from(message.body),
        });
      }
      return;
    }
  }
});
