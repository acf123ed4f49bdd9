/**
 * grpc-js client definitions of TF Serving's two services, (de)serialized with protobuf-es:
 * an independent gRPC stack (grpc-js) drives our node:http2 server in the frontend tests.
 */
import type * as grpc from '@grpc/grpc-js';
import {
  type DescMessage,
  type DescMethod,
  type MessageShape,
  fromBinary,
  toBinary,
} from '@bufbuild/protobuf';
import { ModelService, PredictionService } from '@visionserve/protocol/tfs-proto';

export { ModelService, PredictionService };

type UnaryMethod<I extends DescMessage, O extends DescMessage> = DescMethod & {
  readonly methodKind: 'unary';
  readonly input: I;
  readonly output: O;
};

/** The HTTP/2 path of a method, e.g. "/tensorflow.serving.PredictionService/Predict". */
export function grpcPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

function clientMethodDefinition<I extends DescMessage, O extends DescMessage>(
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

export const TFS_CLIENT_METHODS = {
  classify: clientMethodDefinition(PredictionService.method.classify),
  regress: clientMethodDefinition(PredictionService.method.regress),
  predict: clientMethodDefinition(PredictionService.method.predict),
  multiInference: clientMethodDefinition(PredictionService.method.multiInference),
  getModelMetadata: clientMethodDefinition(PredictionService.method.getModelMetadata),
  getModelStatus: clientMethodDefinition(ModelService.method.getModelStatus),
  handleReloadConfigRequest: clientMethodDefinition(ModelService.method.handleReloadConfigRequest),
} as const;
