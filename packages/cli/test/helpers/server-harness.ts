import { connect, type Socket } from 'node:net';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { createGrpcChannel, type GrpcChannel } from '@visionserve/client';
import { type Tensor } from '@visionserve/protocol';
import {
  tensorFromProto,
  tensorToProto,
  PredictRequestSchema,
  PredictResponseSchema,
} from '@visionserve/protocol/tfs-proto';
import { resolveServerConfig, type ServerConfig } from '@visionserve/server';
import { startVisionServer, type RunningVisionServer, type VisionServerHooks } from '@visionserve/server';
import { silentLogger } from '@visionserve/server';
import { assertContract, watchPorts } from './contract.js';

export interface Harness {
  readonly server: RunningVisionServer;
  readonly rest: string;
  readonly grpc: GrpcChannel;
  /** Base URL of the SageMaker-style endpoint; empty when it is disabled (the default here). */
  readonly sagemaker: string;
  close(): Promise<void>;
}

/** A real server on ephemeral loopback ports. */
export async function startHarness(
  flags: Partial<ServerConfig>,
  hooks: VisionServerHooks = {},
): Promise<Harness> {
  const config = resolveServerConfig({
    host: '127.0.0.1',
    grpcPort: 0,
    restPort: 0,
    sagemakerPort: -1,
    logLevel: 'silent',
    // Functional tests must not depend on how fast this machine is: no load shedding
    // unless a test asks for it (the admission tests do).
    maxQueueWaitMs: 0,
    maxJsonDecodeBacklogMs: 0,
    ...flags,
  });
  const server = await startVisionServer(config, silentLogger, hooks);
  watchPorts(server.ports.rest, server.ports.sagemaker);
  const grpc = createGrpcChannel({ address: `127.0.0.1:${server.ports.grpc!}` });
  return {
    server,
    rest: `http://127.0.0.1:${server.ports.rest!}`,
    grpc,
    sagemaker: server.ports.sagemaker === undefined ? '' : `http://127.0.0.1:${server.ports.sagemaker}`,
    async close() {
      grpc.close();
      await server.close();
      assertContract();
    },
  };
}

export interface GrpcPredictOptions {
  readonly version?: number;
  readonly label?: string;
  readonly asTensorContent?: boolean;
  readonly outputFilter?: string[];
}

/** Predict over gRPC with our proto messages; returns decoded output tensors and the response spec. */
export async function grpcPredict(
  channel: GrpcChannel,
  model: string,
  inputs: Record<string, Tensor>,
  options: GrpcPredictOptions = {},
): Promise<{ outputs: Record<string, Tensor>; version: bigint | undefined }> {
  const request = create(PredictRequestSchema, {
    modelSpec: {
      name: model,
      ...(options.version !== undefined
        ? { versionChoice: { case: 'version', value: { value: BigInt(options.version) } } }
        : options.label !== undefined
          ? { versionChoice: { case: 'versionLabel', value: options.label } }
          : {}),
    },
    outputFilter: options.outputFilter ?? [],
  });
  for (const [name, t] of Object.entries(inputs)) {
    request.inputs[name] = tensorToProto(t, { asTensorContent: options.asTensorContent ?? true });
  }
  const bytes = await channel.unary(
    '/tensorflow.serving.PredictionService/Predict',
    toBinary(PredictRequestSchema, request),
  );
  const response = fromBinary(PredictResponseSchema, bytes);
  const outputs: Record<string, Tensor> = {};
  for (const [name, proto] of Object.entries(response.outputs)) outputs[name] = tensorFromProto(proto, name);
  const choice = response.modelSpec?.versionChoice;
  return { outputs, version: choice?.case === 'version' ? choice.value.value : undefined };
}

/** Nested JS arrays from a flat array and a shape (for REST bodies). */
export function nest(data: ArrayLike<number>, shape: readonly number[]): unknown {
  const rec = (offset: number, depth: number): unknown => {
    const size = shape[depth]!;
    if (depth === shape.length - 1) return Array.from({ length: size }, (_, i) => data[offset + i]);
    const stride = shape.slice(depth + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: size }, (_, i) => rec(offset + i * stride, depth + 1));
  };
  return rec(0, 0);
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as unknown };
}

/**
 * One HTTP/1.1 exchange over a raw socket: writes `head` (request line and headers, the
 * blank line included), then reads until `until` matches what arrived (or the server
 * closes), and hands the socket to `then` to go on (write a body, read more). Resolves
 * with everything read; the socket is destroyed at the end.
 */
export async function rawHttp(
  port: number,
  head: string,
  until: RegExp,
  then?: (socket: Socket, read: (until: RegExp) => Promise<string>) => Promise<void>,
): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  let closed = false;
  let wake: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    wake?.();
  });
  socket.on('close', () => {
    closed = true;
    wake?.();
  });
  socket.on('error', () => undefined);
  const read = async (pattern: RegExp): Promise<string> => {
    const deadline = Date.now() + 30_000;
    while (!pattern.test(text) && !closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 100);
      });
    }
    return text;
  };
  try {
    socket.write(head);
    await read(until);
    if (then !== undefined) await then(socket, read);
    return text;
  } finally {
    socket.destroy();
  }
}
