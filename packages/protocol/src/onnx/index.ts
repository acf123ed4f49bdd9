// `@visionserve/protocol/onnx`: the subset of the ONNX model format visionserve reads and
// writes (our own wire-compatible .proto), and a reader of a model's signature and provenance.
export * from './onnx-model-info.js';
export * from '../gen/onnx/onnx_subset_pb.js';
