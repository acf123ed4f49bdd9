// `@visionserve/protocol`: Tensor, dtypes, the one error type and its HTTP mapping, and the
// TF Serving REST JSON codec. No protobuf here: the wire messages and TensorProto codecs are
// in `@visionserve/protocol/tfs-proto`.
export * from './dtype.js';
export * from './errors.js';
export * from './tensor.js';
export * from './json-writer.js';
export * from './tfs-json-decode.js';
export * from './numeric-json.js';
export * from './json-limits.js';
export * from './tfs-json-encode.js';
export * from './records.js';
export * from './tf-example.js';
export * from './tfs-json-examples.js';
