// `@visionserve/protocol/kserve-proto`: the Open Inference Protocol gRPC messages (package
// `inference`, service GRPCInferenceService), generated with protobuf-es from our own
// wire-compatible proto/inference/inference.proto. Kept apart so that HTTP users never load
// protobuf.
export * from '../gen/inference/inference_pb.js';
