/**
 * The Open Inference Protocol (KServe v2) gRPC binding: `inference.GRPCInferenceService` as
 * a service of the gRPC transport (frontends/grpc), over the same protocol-neutral
 * KServeService as the HTTP binding. The stock `tritonclient.grpc` works against it
 * unchanged. Errors are gRPC statuses with Triton's codes (INVALID_ARGUMENT, NOT_FOUND,
 * UNAVAILABLE, UNIMPLEMENTED, INTERNAL); ModelReady of an unknown model is NOT_FOUND, as in
 * Triton (the HTTP binding answers false).
 *
 * ModelInfer: inputs come from `raw_input_contents` (views of the request message, which
 * the transport places so that the first one is 8-byte aligned, and which moves to the
 * worker with them) or typed `contents`; every output goes back in `raw_output_contents`,
 * numeric data written as views of the output tensors.
 */
import {
  type DescMessage,
  type JsonValue,
  type MessageInitShape,
  type MessageShape,
  create,
  fromBinary,
  fromJson,
  toBinary,
} from '@bufbuild/protobuf';
import { Code, ServingError, invalidArgument } from '@visionserve/protocol';
import {
  ModelConfigRequestSchema,
  ModelConfigResponseSchema,
  ModelConfigSchema,
  ModelMetadataRequestSchema,
  ModelMetadataResponseSchema,
  ModelReadyRequestSchema,
  ModelReadyResponseSchema,
  type ModelRepositoryParameter,
  ModelStatisticsRequestSchema,
  ModelStatisticsResponseSchema,
  ModelStatisticsSchema,
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
  decodeModelInferRequest,
  modelInferRequestModel,
  modelInferRequestRawOffset,
  writeModelInferResponse,
} from '@visionserve/protocol/kserve-proto';
import type { GrpcCallContext, GrpcMethod, GrpcService } from '../../grpc/grpc-service.js';
import type { ManagementGuard } from '../../shared/management-guard.js';
import type { KServeService } from '../kserve-service.js';
import type { Logger } from '../../../util/logger.js';
import { serveModelStreamInfer } from './stream-infer.js';

export interface KServeGrpcServiceOptions {
  /** The protocol-neutral KServe operations (shared with the HTTP binding). */
  readonly kserve: KServeService;
  /**
   * Decides who may call RepositoryModelLoad / RepositoryModelUnload (the same guard as the
   * HTTP repository extension and TF Serving's HandleReloadConfigRequest); refusals are
   * PERMISSION_DENIED. Default: none (anyone may, subject to the control mode).
   */
  readonly managementGuard?: ManagementGuard | undefined;
  /** Where internal faults of stream requests are logged. Default: not logged. */
  readonly logger?: Logger | undefined;
}

/** The service name tritonclient's stubs call (`/inference.GRPCInferenceService/<Method>`). */
export const KSERVE_GRPC_SERVICE = 'inference.GRPCInferenceService';

/** Decodes a request message; undecodable bytes are INVALID_ARGUMENT (not INTERNAL). */
function decode<D extends DescMessage>(schema: D, bytes: Uint8Array): MessageShape<D> {
  try {
    return fromBinary(schema, bytes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : 'undecodable bytes';
    throw invalidArgument(`Malformed ${schema.typeName}: ${reason}`);
  }
}

const one = <D extends DescMessage>(schema: D, init: MessageInitShape<D>): Uint8Array[] => [
  toBinary(schema, create(schema, init)),
];

/** The JSON shapes of the KServe operations are the messages' proto3 JSON (checked by a test). */
const asJson = (value: unknown): JsonValue => value as JsonValue;

function repositoryNotSupported(name: string): void {
  if (name !== '') {
    throw new ServingError(Code.UNIMPLEMENTED, "'repository_name' specification is not supported");
  }
}

function repositoryParameter(parameter: ModelRepositoryParameter, key: string): unknown {
  const choice = parameter.parameterChoice;
  if (choice.case === undefined) {
    throw invalidArgument(`repository parameter '${key.slice(0, 64)}' has no value`);
  }
  return choice.value;
}

/** inference.GRPCInferenceService. */
export function createKServeGrpcService(options: KServeGrpcServiceOptions): GrpcService {
  const { kserve, managementGuard } = options;

  const unary =
    (
      handler: (
        bytes: Uint8Array,
        signal: AbortSignal,
        context: GrpcCallContext,
      ) => Uint8Array[] | Promise<Uint8Array[]>,
    ): GrpcMethod['handler'] =>
    async (bytes, context) =>
      handler(bytes, context.signal, context);

  const methods: Record<string, GrpcMethod> = {
    ServerLive: {
      handler: unary((bytes) => {
        decode(ServerLiveRequestSchema, bytes);
        return one(ServerLiveResponseSchema, { live: kserve.serverLive() });
      }),
    },
    ServerReady: {
      handler: unary((bytes) => {
        decode(ServerReadyRequestSchema, bytes);
        return one(ServerReadyResponseSchema, { ready: kserve.serverReady() });
      }),
    },
    ServerMetadata: {
      handler: unary((bytes) => {
        decode(ServerMetadataRequestSchema, bytes);
        const { name, version, extensions } = kserve.serverMetadata();
        return one(ServerMetadataResponseSchema, { name, version, extensions: [...extensions] });
      }),
    },
    ModelReady: {
      handler: unary((bytes) => {
        const request = decode(ModelReadyRequestSchema, bytes);
        return one(ModelReadyResponseSchema, { ready: kserve.modelReady(request) });
      }),
    },
    ModelMetadata: {
      handler: unary(async (bytes, signal) => {
        const request = decode(ModelMetadataRequestSchema, bytes);
        const json = await kserve.modelMetadata(request, signal);
        return [toBinary(ModelMetadataResponseSchema, fromJson(ModelMetadataResponseSchema, asJson(json)))];
      }),
    },
    ModelConfig: {
      handler: unary(async (bytes, signal) => {
        const request = decode(ModelConfigRequestSchema, bytes);
        const config = fromJson(ModelConfigSchema, asJson(await kserve.modelConfig(request, signal)));
        return one(ModelConfigResponseSchema, { config });
      }),
    },
    ModelStatistics: {
      handler: unary((bytes) => {
        const request = decode(ModelStatisticsRequestSchema, bytes);
        // An empty name asks for every model (whatever the version says), as in Triton.
        const { model_stats } = kserve.statistics(request.name === '' ? undefined : request);
        return one(ModelStatisticsResponseSchema, {
          modelStats: model_stats.map((s) => fromJson(ModelStatisticsSchema, asJson(s))),
        });
      }),
    },
    RepositoryIndex: {
      handler: unary(async (bytes) => {
        const request = decode(RepositoryIndexRequestSchema, bytes);
        repositoryNotSupported(request.repositoryName);
        const entries = await kserve.repositoryIndex(request.ready);
        return [
          toBinary(
            RepositoryIndexResponseSchema,
            fromJson(RepositoryIndexResponseSchema, asJson({ models: entries })),
          ),
        ];
      }),
    },
    RepositoryModelLoad: {
      handler: unary(async (bytes, _signal, context) => {
        // Checked before the message is read: a refused caller learns nothing about its content.
        managementGuard?.check(context.credentials(), 'load model');
        const request = decode(RepositoryModelLoadRequestSchema, bytes);
        repositoryNotSupported(request.repositoryName);
        const parameters: Record<string, unknown> = {};
        for (const [key, parameter] of Object.entries(request.parameters)) {
          parameters[key] = repositoryParameter(parameter, key);
        }
        await kserve.loadModel(request.modelName, parameters);
        return one(RepositoryModelLoadResponseSchema, {});
      }),
    },
    RepositoryModelUnload: {
      handler: unary(async (bytes, _signal, context) => {
        managementGuard?.check(context.credentials(), 'unload model');
        const request = decode(RepositoryModelUnloadRequestSchema, bytes);
        repositoryNotSupported(request.repositoryName);
        const dependents = request.parameters['unload_dependents'];
        if (dependents !== undefined && dependents.parameterChoice.case !== 'boolParam') {
          throw invalidArgument('unload_dependents must be a bool_param');
        }
        await kserve.unloadModel(request.modelName);
        return one(RepositoryModelUnloadResponseSchema, {});
      }),
    },
    ModelInfer: {
      alignment: modelInferRequestRawOffset,
      // Shed (or answer NOT_FOUND) before the tensors are read.
      admit(head, call) {
        const ref = modelInferRequestModel(head);
        return ref === undefined ? undefined : kserve.admit(ref, call, call.body);
      },
      async handler(bytes, { signal, deadline, messageBuffer, outputLease }) {
        const arrivedAt = process.hrtime.bigint();
        const request = decodeModelInferRequest(bytes);
        return kserve.infer({ name: request.modelName, version: request.modelVersion }, request, {
          signal,
          deadline,
          arrivedAt,
          // The message buffer is this call's own: raw inputs viewing it move to the worker with it.
          ownedBuffers: [messageBuffer],
          outputLease,
          encode: writeModelInferResponse,
        });
      },
    },
    ModelStreamInfer: {
      handler: () =>
        Promise.reject(new ServingError(Code.UNIMPLEMENTED, 'ModelStreamInfer is a streaming method')),
      stream: (call) =>
        serveModelStreamInfer(kserve, call, (error) => {
          options.logger?.error('kserve stream infer failed', { error });
        }),
    },
  };
  return { name: KSERVE_GRPC_SERVICE, api: 'kserve-grpc', methods };
}
