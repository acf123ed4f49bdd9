/**
 * TF Serving's gRPC API (PredictionService, ModelService) over the core
 * InferenceService. Handlers only decode, call core, encode; status mapping lives
 * in unary-call.ts.
 *
 * ReloadConfig errors: like TF Serving, a failed reload is answered with the
 * failing gRPC status (clients then see no response body); a successful one with
 * a ReloadConfigResponse whose status is OK.
 */
import type * as grpc from '@grpc/grpc-js';
import { create, fromBinary } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { type Tensor, invalidArgument, unimplemented } from '@visionserve/protocol';
import {
  predictRequestIsViewable,
  predictRequestViewFrom,
  tensorFromProtoView,
  tensorToProto,
  PredictRequestSchema,
  PredictResponseSchema,
  type PredictRequestView,
  PredictRequestViewSchema,
  GetModelMetadataResponseSchema,
  SignatureDefMapSchema,
  GetModelStatusResponseSchema,
  ReloadConfigResponseSchema,
} from '@visionserve/protocol/tfs-proto';
import type { InferenceService } from '../../core/inference-service.js';
import type { Logger } from '../../util/logger.js';
import { ModelService, PredictionService, serverMethodDefinition } from './service-definitions.js';
import type { GrpcServiceRegistrar } from './grpc-server.js';
import { unaryCall } from './unary-call.js';
import {
  modelConfigsFromProto,
  modelSpecFromProto,
  modelSpecToProto,
  signatureDefMapFromSignatures,
  versionStatusToProto,
} from './tfs-messages.js';

export interface TfsGrpcFrontendOptions {
  /** The core inference API every call is served from. */
  readonly service: InferenceService;
  /** Receives internal errors (with the method name) and config reloads. */
  readonly logger: Logger;
  /**
   * Encode Predict outputs as `tensor_content` bytes instead of typed `*_val`
   * fields (TF Serving's --enable_serialization_as_tensor_content). Strings always
   * use `string_val`. Default false.
   */
  readonly serializeAsTensorContent?: boolean | undefined;
}

/**
 * Predict requests decode through PredictRequestView when their float fields are
 * packed (every standard encoder): typed float inputs then arrive as byte views,
 * not one JS number per element (150k floats: ~7 ms of main-thread CPU saved).
 */
function decodePredictRequest(bytes: Uint8Array): PredictRequestView {
  return predictRequestIsViewable(bytes)
    ? fromBinary(PredictRequestViewSchema, bytes)
    : predictRequestViewFrom(fromBinary(PredictRequestSchema, bytes));
}

/** The only metadata field TF Serving (and visionserve) supports. */
const SIGNATURE_DEF_FIELD = 'signature_def';

/** Adds tensorflow.serving.PredictionService and tensorflow.serving.ModelService to a grpc-js server. */
export function createTfsGrpcFrontend(options: TfsGrpcFrontendOptions): GrpcServiceRegistrar {
  const { service } = options;
  const logger = options.logger.child({ frontend: 'tfs-grpc' });
  const asTensorContent = options.serializeAsTensorContent ?? false;
  const P = PredictionService.method;
  const M = ModelService.method;

  const notSupported = (api: string) => (): Promise<never> =>
    Promise.reject(
      unimplemented(`${api} is not supported: visionserve serves ONNX models through Predict only`),
    );

  const prediction = {
    classify: unaryCall(P.classify, logger, notSupported('Classify')),
    regress: unaryCall(P.regress, logger, notSupported('Regress')),
    multiInference: unaryCall(P.multiInference, logger, notSupported('MultiInference')),

    predict: unaryCall(
      P.predict,
      logger,
      async (request: PredictRequestView, { signal }) => {
        const model = modelSpecFromProto(request.modelSpec);
        const inputs: Record<string, Tensor> = Object.fromEntries(
          Object.entries(request.inputs).map(([alias, proto]) => [
            alias,
            tensorFromProtoView(proto, `input '${alias}'`),
          ]),
        );
        const result = await service.predict(
          { model, inputs, outputFilter: request.outputFilter },
          { signal },
        );
        const outputs = Object.fromEntries(
          Object.entries(result.outputs).map(([alias, tensor]) => [
            alias,
            tensorToProto(tensor, { asTensorContent, prepackFloats: true }),
          ]),
        );
        return create(PredictResponseSchema, {
          modelSpec: modelSpecToProto(result.model, result.model.signatureName),
          outputs,
        });
      },
      decodePredictRequest,
    ),

    getModelMetadata: unaryCall(P.getModelMetadata, logger, (request) => {
      const model = modelSpecFromProto(request.modelSpec);
      if (request.metadataField.length === 0) {
        throw invalidArgument(`GetModelMetadataRequest must list metadata_field "${SIGNATURE_DEF_FIELD}"`);
      }
      for (const field of request.metadataField) {
        if (field !== SIGNATURE_DEF_FIELD) {
          throw invalidArgument(
            `Metadata field "${field}" is not supported; only "${SIGNATURE_DEF_FIELD}" is`,
          );
        }
      }
      return service.withServable(model, (servable) =>
        Promise.resolve(
          create(GetModelMetadataResponseSchema, {
            modelSpec: modelSpecToProto({
              name: servable.name,
              version: servable.version,
              signatureName: '',
            }),
            metadata: {
              [SIGNATURE_DEF_FIELD]: anyPack(
                SignatureDefMapSchema,
                signatureDefMapFromSignatures(servable.signatures),
              ),
            },
          }),
        ),
      );
    }),
  };

  const models = {
    getModelStatus: unaryCall(M.getModelStatus, logger, (request) => {
      const statuses = service.status(modelSpecFromProto(request.modelSpec));
      return Promise.resolve(
        create(GetModelStatusResponseSchema, { modelVersionStatus: statuses.map(versionStatusToProto) }),
      );
    }),

    handleReloadConfigRequest: unaryCall(M.handleReloadConfigRequest, logger, async (request) => {
      const configs = modelConfigsFromProto(request.config);
      await service.reloadConfig(configs);
      logger.info('model config reloaded', { models: configs.map((c) => c.name) });
      return create(ReloadConfigResponseSchema, { status: { errorMessage: '' } });
    }),
  };

  return {
    register(server: grpc.Server): void {
      server.addService(
        {
          classify: serverMethodDefinition(P.classify),
          regress: serverMethodDefinition(P.regress),
          predict: serverMethodDefinition(P.predict),
          multiInference: serverMethodDefinition(P.multiInference),
          getModelMetadata: serverMethodDefinition(P.getModelMetadata),
        },
        prediction,
      );
      server.addService(
        {
          getModelStatus: serverMethodDefinition(M.getModelStatus),
          handleReloadConfigRequest: serverMethodDefinition(M.handleReloadConfigRequest),
        },
        models,
      );
    },
  };
}
