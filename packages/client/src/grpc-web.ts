// Browser-safe entry "@visionserve/client/grpc-web": TF Serving's typed gRPC API over
// gRPC-web on fetch. Imports no node: module (the HTTP/2 channel is only referenced as a type).
import { type GrpcWebChannelOptions, createGrpcWebChannel } from './grpc-web-channel.js';
import { createTfsGrpcStub } from './tfs-grpc-stub.js';
import type { TfsCallDefaults, TfsGrpcClient } from './tfs-grpc-types.js';

export { Code, ServingError } from '@visionserve/protocol';
export type { DType, Tensor, TensorData } from '@visionserve/protocol';
export type { CallOptions } from './call-options.js';
export type { UnaryCallOptions, GrpcChannel } from './grpc-channel-types.js';
export * from './grpc-web-channel.js';
export * from './model-ref.js';
export type * from './results.js';
export type { GrpcPredictOptions, TensorEncoding, TfsCallDefaults, TfsGrpcClient } from './tfs-grpc-types.js';
export { createTfsGrpcStub } from './tfs-grpc-stub.js';

export interface TfsGrpcWebClientOptions extends TfsCallDefaults, GrpcWebChannelOptions {}

/**
 * TF Serving's PredictionService / ModelService over gRPC-web, e.g. from a browser page
 * served by visionserve: `createTfsGrpcWebClient({ baseUrl: '' })`.
 */
export function createTfsGrpcWebClient(options: TfsGrpcWebClientOptions): TfsGrpcClient {
  return createTfsGrpcStub(createGrpcWebChannel(options), options);
}
