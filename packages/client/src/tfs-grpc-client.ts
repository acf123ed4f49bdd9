/**
 * TF Serving gRPC client (PredictionService.Predict / GetModelMetadata, ModelService
 * GetModelStatus / HandleReloadConfigRequest) over the node:http2 channel; no grpc-js.
 * The protobuf codec is loaded on the first call, so creating a client is cheap.
 */
import type { ClientTlsOptions } from './client-tls.js';
import { type GrpcClientTransport, createGrpcChannel } from './grpc-channel.js';
import { createTfsGrpcStub } from './tfs-grpc-stub.js';
import type { TfsCallDefaults, TfsGrpcClient } from './tfs-grpc-types.js';

export type { GrpcPredictOptions, TensorEncoding, TfsCallDefaults, TfsGrpcClient } from './tfs-grpc-types.js';
export type { ModelConfigEntry } from './model-config-entry.js';

export interface TfsGrpcClientOptions extends TfsCallDefaults {
  /** Server address, "host:port" (TF Serving's default gRPC port is 8500), or "https://host:port" for TLS. */
  readonly address: string;
  /** Largest accepted response message in bytes. Default 2 GiB - 1. */
  readonly maxReceiveBytes?: number;
  /** The HTTP/2 implementation (GrpcChannelOptions.transport). Default 'lean'. */
  readonly transport?: GrpcClientTransport;
  /** TLS settings for an https:// address (or "host:port"): a private CA, a client certificate. */
  readonly tls?: ClientTlsOptions;
}

export function createTfsGrpcClient(options: TfsGrpcClientOptions): TfsGrpcClient {
  const channel = createGrpcChannel({
    address: options.address,
    ...(options.maxReceiveBytes !== undefined ? { maxReceiveBytes: options.maxReceiveBytes } : {}),
    ...(options.transport !== undefined ? { transport: options.transport } : {}),
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
  });
  return createTfsGrpcStub(channel, options);
}
