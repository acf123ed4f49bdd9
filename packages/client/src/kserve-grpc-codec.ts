/**
 * Protobuf encoding and decoding for the KServe v2 gRPC client. Loaded lazily by
 * kserve-grpc-client.ts on the first call: it pulls in @bufbuild/protobuf and the generated
 * `inference` messages, which the rest of the client does not need.
 */
import {
  type DescMessage,
  type MessageInitShape,
  type MessageShape,
  create,
  fromBinary,
  toBinary,
  toJson,
} from '@bufbuild/protobuf';
import { Code, ServingError } from '@visionserve/protocol';
import {
  ModelConfigRequestSchema,
  ModelConfigResponseSchema,
  ModelMetadataRequestSchema,
  ModelMetadataResponseSchema,
  ModelReadyRequestSchema,
  ModelReadyResponseSchema,
  ModelStatisticsRequestSchema,
  ModelStatisticsResponseSchema,
  RepositoryIndexRequestSchema,
  RepositoryIndexResponseSchema,
  RepositoryModelLoadRequestSchema,
  RepositoryModelLoadResponseSchema,
  RepositoryModelUnloadRequestSchema,
  RepositoryModelUnloadResponseSchema,
  ServerLiveRequestSchema,
  ServerLiveResponseSchema,
  ServerMetadataRequestSchema,
  ServerMetadataResponseSchema,
  ServerReadyRequestSchema,
  ServerReadyResponseSchema,
  decodeModelInferResponse,
  encodeModelInferRequest,
} from '@visionserve/protocol/kserve-proto';

export { decodeModelInferResponse, encodeModelInferRequest };

/** A request message's bytes. */
export function encode<D extends DescMessage>(schema: D, init: MessageInitShape<D>): Uint8Array {
  return toBinary(schema, create(schema, init));
}

/** A response message; undecodable bytes are INTERNAL (the server broke the protocol). */
export function decode<D extends DescMessage>(schema: D, bytes: Uint8Array): MessageShape<D> {
  try {
    return fromBinary(schema, bytes);
  } catch (error) {
    throw new ServingError(Code.INTERNAL, `Malformed ${schema.typeName} from the server: ${String(error)}`);
  }
}

/** A message as proto3 JSON with the proto field names (tritonclient's `as_json`; 64-bit integers as strings). */
export function json<D extends DescMessage>(schema: D, message: MessageShape<D>): Record<string, unknown> {
  return toJson(schema, message, { useProtoFieldName: true }) as Record<string, unknown>;
}

/** Request and response schemas of every unary RPC but ModelInfer, by method name. */
export const RPC = {
  ServerLive: [ServerLiveRequestSchema, ServerLiveResponseSchema],
  ServerReady: [ServerReadyRequestSchema, ServerReadyResponseSchema],
  ServerMetadata: [ServerMetadataRequestSchema, ServerMetadataResponseSchema],
  ModelReady: [ModelReadyRequestSchema, ModelReadyResponseSchema],
  ModelMetadata: [ModelMetadataRequestSchema, ModelMetadataResponseSchema],
  ModelConfig: [ModelConfigRequestSchema, ModelConfigResponseSchema],
  ModelStatistics: [ModelStatisticsRequestSchema, ModelStatisticsResponseSchema],
  RepositoryIndex: [RepositoryIndexRequestSchema, RepositoryIndexResponseSchema],
  RepositoryModelLoad: [RepositoryModelLoadRequestSchema, RepositoryModelLoadResponseSchema],
  RepositoryModelUnload: [RepositoryModelUnloadRequestSchema, RepositoryModelUnloadResponseSchema],
} as const;
