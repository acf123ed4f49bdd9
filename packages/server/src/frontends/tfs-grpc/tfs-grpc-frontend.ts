/**
 * TF Serving's gRPC API (tensorflow.serving.PredictionService and ModelService) as
 * services of the gRPC transport (frontends/grpc). Handlers only decode, make one core
 * call, encode; the transport maps errors to statuses.
 *
 * ReloadConfig errors: like TF Serving, a failed reload is answered with the failing gRPC
 * status (clients then see no response body); a successful one with a ReloadConfigResponse
 * whose status is OK.
 */
import {
  type DescMessage,
  type MessageShape,
  create,
  fromBinary,
  fromJson,
  toBinary,
} from '@bufbuild/protobuf';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { StructSchema, anyPack } from '@bufbuild/protobuf/wkt';
import { Code, ServingError, type Tensor, invalidArgument } from '@visionserve/protocol';
import {
  ClassificationRequestSchema,
  ClassificationResponseSchema,
  GetModelMetadataRequestSchema,
  GetModelMetadataResponseSchema,
  GetModelStatusRequestSchema,
  GetModelStatusResponseSchema,
  ModelSpecSchema,
  MultiInferenceRequestSchema,
  MultiInferenceResponseSchema,
  PredictRequestSchema,
  type PredictRequestView,
  PredictRequestViewSchema,
  RegressionRequestSchema,
  RegressionResponseSchema,
  ReloadConfigRequestSchema,
  ReloadConfigResponseSchema,
  SignatureDefMapSchema,
  classificationResultToProto,
  exampleInputFromProto,
  predictRequestIsViewable,
  predictRequestTensorOffset,
  predictRequestViewFrom,
  readVarint,
  regressionResultToProto,
  tensorFromProtoView,
  writePredictResponse,
  type ModelServerConfig,
} from '@visionserve/protocol/tfs-proto';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { InferenceService, ModelSpec } from '../../core/inference-service.js';
import type { ModelConfig } from '../../core/model-config.js';
import type { Logger } from '../../util/logger.js';
import type { GrpcMethod, GrpcService } from '../grpc/grpc-service.js';
import { type ConcurrencyLimit, createConcurrencyLimit } from '../shared/concurrency-limit.js';
import {
  type ExamplesInferenceOptions,
  classifyOn,
  multiInferenceOn,
  regressOn,
} from '../shared/examples-inference.js';
import type { ManagementGuard } from '../shared/management-guard.js';
import {
  modelSpecFromProto,
  modelSpecToProto,
  signatureDefMapFromSignatures,
  versionStatusToProto,
} from './tfs-messages.js';

export interface TfsGrpcFrontendOptions {
  /** The core inference API every call is served from; versions carry their assets. */
  readonly service: InferenceService<ServableAssets>;
  /** Image decodes in flight at once (encoded images in tf.Example features). Default: 2. */
  readonly imageDecodes?: ConcurrencyLimit | undefined;
  /** Receives config reloads. */
  readonly logger: Logger;
  /**
   * Encode Predict outputs as `tensor_content` bytes instead of typed `*_val` fields (TF
   * Serving's --enable_serialization_as_tensor_content). Strings always use `string_val`.
   */
  readonly serializeAsTensorContent: boolean;
  /**
   * The served model set a HandleReloadConfigRequest asks for: the one mapping from
   * ModelServerConfig that the config file uses too (injected: it belongs to the repository).
   */
  readonly readModelServerConfig: (config: ModelServerConfig | undefined) => ModelConfig[];
  /** Who may call HandleReloadConfigRequest. Default: anyone (TF Serving's behaviour). */
  readonly managementGuard?: ManagementGuard | undefined;
}

export const PREDICTION_SERVICE = 'tensorflow.serving.PredictionService';
export const MODEL_SERVICE = 'tensorflow.serving.ModelService';

/** Decodes a request message; undecodable bytes are INVALID_ARGUMENT (not INTERNAL). */
function decode<D extends DescMessage>(schema: D, bytes: Uint8Array): MessageShape<D> {
  try {
    return fromBinary(schema, bytes);
  } catch (error) {
    throw malformed(schema.typeName, error);
  }
}

function malformed(typeName: string, error: unknown): ServingError {
  const reason = error instanceof Error ? error.message : 'undecodable bytes';
  return new ServingError(Code.INVALID_ARGUMENT, `Malformed ${typeName}: ${reason}`);
}

/**
 * Predict requests decode through PredictRequestView when their float and int32 fields are
 * packed (every standard encoder): typed float inputs then arrive as byte views and int_val
 * is read straight into a typed array, not one JS number per element; `tensor_content` is a
 * view either way.
 */
function decodePredictRequest(bytes: Uint8Array): PredictRequestView {
  try {
    return predictRequestIsViewable(bytes)
      ? fromBinary(PredictRequestViewSchema, bytes)
      : predictRequestViewFrom(fromBinary(PredictRequestSchema, bytes));
  } catch (error) {
    throw malformed(PredictRequestSchema.typeName, error);
  }
}

/**
 * The model_spec of a PredictRequest from the head of its message, when it is the first
 * field and lies whole in the head (standard encoders write fields in number order);
 * undefined otherwise (the full decode then reports any problem).
 */
export function modelSpecFromHead(head: Uint8Array): ModelSpec | undefined {
  try {
    const reader = new BinaryReader(head);
    const [field, wireType] = reader.tag();
    if (field !== 1 || wireType !== WireType.LengthDelimited) return undefined;
    const length = reader.uint32();
    if (reader.pos + length > head.byteLength) return undefined;
    const bytes = head.subarray(reader.pos, reader.pos + length);
    return plainModelSpec(bytes) ?? modelSpecFromProto(fromBinary(ModelSpecSchema, bytes));
  } catch {
    return undefined;
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
/** Wire type of strings and messages (WireType.LengthDelimited). */
const LENGTH_DELIMITED = 2;

/**
 * The ModelSpec every client sends (each field once, name 1, version 2 as an Int64Value of a
 * safe integer or version_label 4, signature_name 3), read without protobuf-es's reflective
 * decoder (per request); undefined for anything else, which then takes the general decoder.
 * Strings are checked UTF-8 (a proto3 string, as protobuf-es checks it).
 */
function plainModelSpec(bytes: Uint8Array): ModelSpec | undefined {
  let name = '';
  let signatureName = '';
  let version: number | undefined;
  let label: string | undefined;
  let seen = 0;
  let pos = 0;
  while (pos < bytes.length) {
    const tag = readVarint(bytes, pos);
    if (tag === undefined || tag[0] % 8 !== LENGTH_DELIMITED) return undefined;
    const field = Math.floor(tag[0] / 8);
    if (field < 1 || field > 4 || (seen & (1 << field)) !== 0) return undefined;
    seen |= 1 << field;
    const length = readVarint(bytes, tag[1]);
    if (length === undefined || length[1] + length[0] > bytes.length) return undefined;
    const body = bytes.subarray(length[1], length[1] + length[0]);
    pos = length[1] + length[0];
    if (field === 2) {
      // Int64Value: empty (value 0) or its field 1 as a varint.
      if (body.length === 0) version = 0;
      else {
        const value = body[0] === 0x08 ? readVarint(body, 1) : undefined;
        if (value === undefined || value[1] !== body.length || value[0] > Number.MAX_SAFE_INTEGER)
          return undefined;
        version = value[0];
      }
      continue;
    }
    const text = strictUtf8.decode(body);
    if (field === 1) name = text;
    else if (field === 3) signatureName = text;
    else label = text;
  }
  // Both members of the version oneof: the general decoder decides.
  if (version !== undefined && label !== undefined) return undefined;
  return { name, version, label, signatureName: signatureName === '' ? undefined : signatureName };
}

/** The only metadata field TF Serving (and visionserve) supports. */
const SIGNATURE_DEF_FIELD = 'signature_def';
/** Metadata entry (a google.protobuf.Struct) naming the signatures a partial load left out. */
const UNSERVED_FIELD = 'unserved_signatures';

const one = <D extends DescMessage>(schema: D, message: MessageShape<D>): Uint8Array[] => [
  toBinary(schema, message),
];

type Service = TfsGrpcFrontendOptions['service'];
/** Limits shared by the tf.Example methods (image decodes in flight). */
type Examples = ExamplesInferenceOptions;

/** Classify on tf.Examples. */
function classifyMethod(service: Service, examples: Examples): GrpcMethod {
  return {
    async handler(bytes, { signal, deadline }) {
      const request = decode(ClassificationRequestSchema, bytes);
      if (request.modelSpec === undefined) throw invalidArgument('Missing ModelSpec');
      const model = modelSpecFromProto(request.modelSpec);
      const input = exampleInputFromProto(request.input);
      const call = { signal, deadline };
      return service.withServable(
        model,
        async (servable) => {
          const { signatureName, results } = await classifyOn(
            servable,
            model.signatureName,
            input,
            examples,
            call,
          );
          return one(
            ClassificationResponseSchema,
            create(ClassificationResponseSchema, {
              modelSpec: modelSpecToProto(
                { name: servable.name, version: servable.version, signatureName },
                signatureName,
              ),
              result: classificationResultToProto(results),
            }),
          );
        },
        call,
      );
    },
  };
}

/** Regress on tf.Examples. */
function regressMethod(service: Service, examples: Examples): GrpcMethod {
  return {
    async handler(bytes, { signal, deadline }) {
      const request = decode(RegressionRequestSchema, bytes);
      if (request.modelSpec === undefined) throw invalidArgument('Missing ModelSpec');
      const model = modelSpecFromProto(request.modelSpec);
      const input = exampleInputFromProto(request.input);
      const call = { signal, deadline };
      return service.withServable(
        model,
        async (servable) => {
          const { signatureName, values } = await regressOn(
            servable,
            model.signatureName,
            input,
            examples,
            call,
          );
          return one(
            RegressionResponseSchema,
            create(RegressionResponseSchema, {
              modelSpec: modelSpecToProto(
                { name: servable.name, version: servable.version, signatureName },
                signatureName,
              ),
              result: regressionResultToProto(values),
            }),
          );
        },
        call,
      );
    },
  };
}

/** MultiInference: classify and regress tasks on one model's tf.Examples. */
function multiInferenceMethod(service: Service, examples: Examples): GrpcMethod {
  return {
    async handler(bytes, { signal, deadline }) {
      const request = decode(MultiInferenceRequestSchema, bytes);
      // TF Serving resolves the model from the first task (an empty name is not found).
      const first = request.tasks[0]?.modelSpec;
      const model = modelSpecFromProto(first ?? create(ModelSpecSchema, {}));
      const input = exampleInputFromProto(request.input);
      const call = { signal, deadline };
      return service.withServable(
        { name: model.name, version: model.version, label: model.label },
        async (servable) => {
          const tasks = request.tasks.map((t) => ({
            modelName: t.modelSpec?.name ?? '',
            signatureName: t.modelSpec?.signatureName,
            methodName: t.methodName,
          }));
          const results = await multiInferenceOn(servable, tasks, input, examples, call);
          return one(
            MultiInferenceResponseSchema,
            create(MultiInferenceResponseSchema, {
              results: results.map((r) => ({
                modelSpec: modelSpecToProto(
                  { name: servable.name, version: servable.version, signatureName: r.signatureName },
                  r.signatureName,
                ),
                result:
                  'classification' in r
                    ? {
                        case: 'classificationResult' as const,
                        value: classificationResultToProto(r.classification),
                      }
                    : { case: 'regressionResult' as const, value: regressionResultToProto(r.regression) },
              })),
            }),
          );
        },
        call,
      );
    },
  };
}

/** Predict: admitted from the message head, tensors read in place. */
function predictMethod(service: Service, asTensorContent: boolean): GrpcMethod {
  return {
    alignment: predictRequestTensorOffset,
    // Shed before the tensors are read when the model's queue is already too long.
    admit(head, call) {
      const spec = modelSpecFromHead(head);
      return spec === undefined ? undefined : service.admit(spec, call, call.body);
    },
    async handler(bytes, { signal, deadline, messageBuffer, outputLease }) {
      const arrivedAt = process.hrtime.bigint();
      const request = decodePredictRequest(bytes);
      const model = modelSpecFromProto(request.modelSpec);
      const inputs: Record<string, Tensor> = {};
      for (const [alias, proto] of Object.entries(request.inputs)) {
        inputs[alias] = tensorFromProtoView(proto, `input '${alias}'`);
      }
      const result = await service.predict(
        { model, inputs, outputFilter: request.outputFilter, ownedBuffers: [messageBuffer], outputLease },
        { signal, deadline, arrivedAt },
      );
      return writePredictResponse(
        result.outputs,
        modelSpecToProto(result.model, result.model.signatureName),
        asTensorContent,
      );
    },
  };
}

/** GetModelMetadata: the signature_def map. */
function getModelMetadataMethod(service: Service): GrpcMethod {
  return {
    handler(bytes) {
      const request = decode(GetModelMetadataRequestSchema, bytes);
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
          one(
            GetModelMetadataResponseSchema,
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
                // Ours (partial loads): the SavedModel signatures left out, name -> reason.
                ...(servable.unservedSignatures === undefined
                  ? {}
                  : {
                      [UNSERVED_FIELD]: anyPack(
                        StructSchema,
                        fromJson(StructSchema, servable.unservedSignatures),
                      ),
                    }),
              },
            }),
          ),
        ),
      );
    },
  };
}

/** GetModelStatus: the versions' states. */
function getModelStatusMethod(service: Service): GrpcMethod {
  return {
    handler(bytes) {
      const request = decode(GetModelStatusRequestSchema, bytes);
      const statuses = service.status(modelSpecFromProto(request.modelSpec));
      return Promise.resolve(
        one(
          GetModelStatusResponseSchema,
          create(GetModelStatusResponseSchema, { modelVersionStatus: statuses.map(versionStatusToProto) }),
        ),
      );
    },
  };
}

/** HandleReloadConfigRequest, behind the management guard. */
function reloadConfigMethod(options: TfsGrpcFrontendOptions, logger: Logger): GrpcMethod {
  return {
    async handler(bytes, context) {
      options.managementGuard?.check(context.credentials(), 'HandleReloadConfigRequest');
      const request = decode(ReloadConfigRequestSchema, bytes);
      const configs = options.readModelServerConfig(request.config);
      await options.service.reloadConfig(configs);
      logger.info('model config reloaded', { models: configs.map((c) => c.name) });
      return one(
        ReloadConfigResponseSchema,
        create(ReloadConfigResponseSchema, { status: { errorMessage: '' } }),
      );
    },
  };
}

/** tensorflow.serving.PredictionService and tensorflow.serving.ModelService. */
export function createTfsGrpcServices(options: TfsGrpcFrontendOptions): GrpcService[] {
  const { service } = options;
  const logger = options.logger.child({ frontend: 'tfs-grpc' });
  const examples: Examples = { imageDecodes: options.imageDecodes ?? createConcurrencyLimit(2) };
  return [
    {
      name: PREDICTION_SERVICE,
      api: 'tfs-grpc',
      methods: {
        Classify: classifyMethod(service, examples),
        Regress: regressMethod(service, examples),
        Predict: predictMethod(service, options.serializeAsTensorContent),
        MultiInference: multiInferenceMethod(service, examples),
        GetModelMetadata: getModelMetadataMethod(service),
      },
    },
    {
      name: MODEL_SERVICE,
      api: 'tfs-grpc',
      methods: {
        GetModelStatus: getModelStatusMethod(service),
        HandleReloadConfigRequest: reloadConfigMethod(options, logger),
      },
    },
  ];
}
