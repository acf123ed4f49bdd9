/**
 * Hand-made grpc-js service definitions for TF Serving's PredictionService and
 * ModelService, (de)serialized with protobuf-es (no proto-loader). Paths are
 * `/tensorflow.serving.<Service>/<Method>`, taken from our own .proto descriptors.
 */
import type * as grpc from '@grpc/grpc-js';
import {
  type DescMessage,
  type DescMethod,
  type MessageShape,
  fromBinary,
  toBinary,
} from '@bufbuild/protobuf';
import { PredictionService, ModelService } from '@visionserve/protocol/tfs-proto';

export { ModelService, PredictionService };

/** A unary method descriptor with its request and response schemas. */
export type UnaryMethod<I extends DescMessage, O extends DescMessage> = DescMethod & {
  readonly methodKind: 'unary';
  readonly input: I;
  readonly output: O;
};

/** The HTTP/2 path of a method, e.g. "/tensorflow.serving.PredictionService/Predict". */
export function grpcPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

/** Wraps bytes as a Buffer without copying (grpc-js frames responses with Buffer methods). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Client-side definition: requests are serialized and responses parsed with protobuf-es. */
export function clientMethodDefinition<I extends DescMessage, O extends DescMessage>(
  method: UnaryMethod<I, O>,
): grpc.MethodDefinition<MessageShape<I>, MessageShape<O>> {
  return {
    path: grpcPath(method),
    originalName: method.localName,
    requestStream: false,
    responseStream: false,
    requestSerialize: (message) => asBuffer(toBinary(method.input, message)),
    requestDeserialize: (bytes) => fromBinary(method.input, bytes),
    responseSerialize: (message) => asBuffer(toBinary(method.output, message)),
    responseDeserialize: (bytes) => fromBinary(method.output, bytes),
  };
}

/**
 * Server-side definition: the request stays raw bytes so that the handler parses it
 * and can answer malformed protobuf with INVALID_ARGUMENT (a throwing deserializer
 * would make grpc-js answer INTERNAL).
 */
export function serverMethodDefinition<I extends DescMessage, O extends DescMessage>(
  method: UnaryMethod<I, O>,
): grpc.MethodDefinition<Buffer, MessageShape<O>> {
  return {
    path: grpcPath(method),
    originalName: method.localName,
    requestStream: false,
    responseStream: false,
    requestSerialize: (bytes) => bytes,
    requestDeserialize: (bytes) => bytes,
    responseSerialize: (message) => asBuffer(toBinary(method.output, message)),
    responseDeserialize: (bytes) => fromBinary(method.output, bytes),
  };
}

/** Typed client definitions of both services, e.g. for tests and the grpc client. */
export const TFS_CLIENT_METHODS = {
  classify: clientMethodDefinition(PredictionService.method.classify),
  regress: clientMethodDefinition(PredictionService.method.regress),
  predict: clientMethodDefinition(PredictionService.method.predict),
  multiInference: clientMethodDefinition(PredictionService.method.multiInference),
  getModelMetadata: clientMethodDefinition(PredictionService.method.getModelMetadata),
  getModelStatus: clientMethodDefinition(ModelService.method.getModelStatus),
  handleReloadConfigRequest: clientMethodDefinition(ModelService.method.handleReloadConfigRequest),
} as const;
