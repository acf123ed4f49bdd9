// Public API of @visionserve/client. No native dependencies: importing this entry never
// loads onnxruntime, sharp or protobuf (the gRPC codec loads on the first gRPC call; the
// optional image helper lives in "@visionserve/client/image").
export { Code, ServingError } from '@visionserve/protocol';
export type { DType, NumericDType, Tensor, TensorData } from '@visionserve/protocol';
export type { CallOptions } from './call-options.js';
export * from './model-ref.js';
export * from './results.js';
export * from './tensors.js';
export * from './batching.js';
export * from './npy.js';
export {
  type ClassScore,
  type Detection,
  type DetectionResult,
  type Labels,
  type LabelsFormat,
  classifyTopK,
  decodeDetections,
  parseLabels,
  parseLabelMap,
  parseLabelLines,
  softmax,
} from '@visionserve/vision';
export type { ClientTlsOptions } from './client-tls.js';
export * from './grpc-channel.js';
export * from './tfs-grpc-client.js';
export * from './tfs-rest-client.js';
export * from './invocations-client.js';
export * from './kserve-http-client.js';
export { parseClassificationEntry, type ClassificationEntry } from '@visionserve/protocol/kserve';
export * from './kserve-grpc-client.js';
export * from './grpc-web-channel.js';
export { createTfsGrpcWebClient, type TfsGrpcWebClientOptions } from './grpc-web.js';
