// `@visionserve/protocol/kserve`: the Open Inference Protocol (KServe v2) wire formats that need
// no protobuf: datatypes, the HTTP/REST inference request and response with the binary tensor
// data extension (BYTES length prefixes, FP16), and the classification extension's strings.
// Shared by the server's KServe frontend and the client. The gRPC messages are in
// `@visionserve/protocol/kserve-proto`.
export * from './datatype.js';
export * from './half.js';
export * from './bytes-elements.js';
export * from './binary-tensor.js';
export * from './infer-types.js';
export * from './json-data.js';
export { INFERENCE_HEADER_CONTENT_LENGTH, type HttpInferBody, jsonHeaderLength } from './http-framing.js';
export * from './http-infer-request.js';
export * from './http-infer-response.js';
export * from './classification.js';
