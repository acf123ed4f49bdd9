// `@visionserve/protocol/kserve-proto`: the Open Inference Protocol gRPC messages (package
// `inference`, service GRPCInferenceService), generated with protobuf-es from our own
// wire-compatible proto/inference/inference.proto, and the ModelInfer codecs (raw contents as
// views both ways). Kept apart so that HTTP users never load protobuf.
export * from '../gen/inference/inference_pb.js';
export * from './grpc-parameters.js';
export * from './tensor-contents.js';
export * from './grpc-infer-request.js';
export * from './grpc-infer-response.js';
