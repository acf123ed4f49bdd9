/**
 * The Open Inference Protocol (KServe v2) without a transport: health, metadata, model
 * configuration, inference (one scoped core call per request), classification,
 * statistics and the model repository, in the protocol's terms. The HTTP binding
 * (./http) adapts it to routes and bodies; a gRPC binding adapts the same operations to
 * `inference.GRPCInferenceService`.
 */
import { ServingError, type Tensor, invalidArgument } from '@visionserve/protocol';
import { type InferRequest, type InferResponse, classificationTensor } from '@visionserve/protocol/kserve';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type {
  BodyArrival,
  CallOptions,
  InferenceService,
  ModelSpec,
  Servable,
} from '../../core/inference-service.js';
import type { InferenceStatisticsReader } from '../../core/inference-statistics.js';
import type { ModelRegistry } from '../../core/model-registry.js';
import { type Signature, batchesAlongDimension0 } from '../../core/signature.js';
import type { OutputLease } from '../../core/session.js';
import type { Logger } from '../../util/logger.js';
import { type ModelMetadataJson, labelledOutput, modelConfigJson, modelMetadataJson } from './model-json.js';
import {
  type ModelControlMode,
  type ModelRoots,
  type RepositoryIndexEntry,
  createRepositoryControl,
} from './repository-control.js';
import { modelStatisticsJson } from './statistics-json.js';
import { checkInputsAsTriton, unknownModelError } from './triton-errors.js';

/** A model as the protocol names it: the version is a decimal string, "" for "the server picks". */
export interface KServeModelRef {
  readonly name: string;
  readonly version: string;
}

/** Protocol extensions this server implements (server metadata `extensions`). */
export const KSERVE_EXTENSIONS: readonly string[] = [
  'binary_tensor_data',
  'classification',
  'model_repository',
  'model_configuration',
  'statistics',
];

export interface KServeServiceOptions {
  /** Core: one scoped call per request; versions carry their assets (labels for classification). */
  readonly service: InferenceService<ServableAssets>;
  /** The configured models (version policies) and explicit load / unload. */
  readonly registry: ModelRegistry;
  /** Per version counters, kept by core for every request to a model (any protocol). */
  readonly statistics: InferenceStatisticsReader;
  /** Model directories a load may add (the model roots); undefined: only configured models. */
  readonly roots?: ModelRoots | undefined;
  /** `explicit` enables repository load / unload; `none` answers them UNAVAILABLE (--kserve_model_control_mode). */
  readonly modelControl: ModelControlMode;
  /** Rescans the configured models' version directories (a load of a loaded model). */
  readonly rescan?: (() => Promise<void>) | undefined;
  /** Server metadata `version`. */
  readonly serverVersion: string;
  /** max_batch_size reported for models that batch along dimension 0 (see batchesAlongDimension0). */
  readonly maxBatchSize: number;
  /** Worker instances per model version (instance_group count). */
  readonly instanceCount: number;
  /** Server-side batching is on (the config then shows dynamic_batching; --enable_batching). */
  readonly dynamicBatching: boolean;
  readonly logger: Logger;
}

/** How a binding runs one inference: it decoded the request, and encodes the response inside the call. */
export interface InferCall<T> {
  /** Cancels the call (client gone, deadline). */
  readonly signal?: AbortSignal | undefined;
  /** When the caller stops waiting (Date.now() clock, ms), if it said. */
  readonly deadline?: number | undefined;
  /**
   * process.hrtime.bigint() when the request's bytes had arrived, before decoding (statistics:
   * success / fail durations and compute_input start here).
   */
  readonly arrivedAt: bigint;
  /**
   * Whole buffers that belong to this request alone and that its input tensors may view
   * (the request body or message): moved to the runtime instead of copied. The binding must
   * not read them after the call.
   */
  readonly ownedBuffers?: readonly ArrayBuffer[] | undefined;
  /**
   * Released by the binding once the encoded response has been written (or the call failed):
   * outputs may live in pooled memory until then (see RunOptions.lease). Default: none.
   */
  readonly outputLease?: OutputLease | undefined;
  /** Encodes the response for the wire (timed as compute_output); runs while the version is pinned. */
  encode(response: InferResponse): T | Promise<T>;
}

export interface KServeService {
  serverMetadata(): { name: string; version: string; extensions: readonly string[] };
  /** The process serves requests. */
  serverLive(): boolean;
  /** Every configured model has an AVAILABLE version. */
  serverReady(): boolean;
  /** Whether the model (version) is AVAILABLE; NOT_FOUND for an unknown model or version. */
  modelReady(ref: KServeModelRef): boolean;
  modelMetadata(ref: KServeModelRef, signal?: AbortSignal): Promise<ModelMetadataJson>;
  modelConfig(ref: KServeModelRef, signal?: AbortSignal): Promise<Record<string, unknown>>;
  infer<T>(ref: KServeModelRef, request: InferRequest, call: InferCall<T>): Promise<T>;
  /** `infer` on a version already pinned (by `withServable`). */
  inferOn<T>(servable: Servable<ServableAssets>, request: InferRequest, call: InferCall<T>): Promise<T>;
  /**
   * Pins the version `ref` names for `fn` (InferenceService.withServable): NOT_FOUND for an
   * unknown model or version, UNAVAILABLE while it loads.
   */
  withServable<T>(
    ref: KServeModelRef,
    fn: (servable: Servable<ServableAssets>) => Promise<T>,
    call?: CallOptions,
  ): Promise<T>;
  /**
   * Admission before the request body is read (`InferenceService.admit`): throws
   * UNAVAILABLE when the version's queue is too long, NOT_FOUND (UNAVAILABLE while it
   * loads) for an unknown model or version. With `body`, the request counts as queued while
   * its message arrives (InferenceService.admit); returns the release to call when it ends.
   */
  admit(
    ref: KServeModelRef,
    call: { signal?: AbortSignal; deadline?: number | undefined },
    body?: BodyArrival,
  ): () => void;
  /** `model_stats` of every AVAILABLE version of every model, of one model, or of one version. */
  statistics(ref?: KServeModelRef): { model_stats: Record<string, unknown>[] };
  repositoryIndex(readyOnly: boolean): Promise<RepositoryIndexEntry[]>;
  loadModel(name: string, parameters: Readonly<Record<string, unknown>>): Promise<void>;
  unloadModel(name: string): Promise<void>;
}

/** The version a protocol version string names: "" is undefined (latest). */
export function parseVersion(version: string): number | undefined {
  if (version === '') return undefined;
  const n = /^\d{1,15}$/.test(version) ? Number(version) : NaN;
  if (!Number.isSafeInteger(n)) {
    throw invalidArgument(
      `failed to get model version from specified version string '${version.slice(0, 32)}'`,
    );
  }
  return n;
}

type Service = InferenceService<ServableAssets>;

const specOf = (ref: KServeModelRef): ModelSpec => ({ name: ref.name, version: parseVersion(ref.version) });

/**
 * NOT_FOUND from core for a version that exists but is still loading becomes
 * UNAVAILABLE (Triton answers 503 for a version that is not ready yet).
 */
/** Core's NOT_FOUND in Triton's words (triton-errors.ts). */
function notReady(service: Service, error: unknown, spec: ModelSpec): unknown {
  return unknownModelError(service, error, spec);
}

async function withModel<T>(
  service: Service,
  ref: KServeModelRef,
  fn: (servable: Servable<ServableAssets>) => Promise<T>,
  call?: CallOptions,
): Promise<T> {
  const spec = specOf(ref);
  try {
    return await service.withServable(spec, fn, call);
  } catch (error) {
    throw notReady(service, error, spec);
  }
}

function availableVersions(service: Service, name: string): number[] {
  return service
    .status({ name })
    .filter((s) => s.state === 'AVAILABLE')
    .map((s) => s.version)
    .sort((a, b) => a - b);
}

function serverReady(service: Service): boolean {
  return service.modelNames().every((name) => {
    try {
      return service.status({ name }).some((s) => s.state === 'AVAILABLE');
    } catch {
      return false;
    }
  });
}

/** The request's input tensors by name, each checked against the signature (Triton's words). */
function inferInputs(
  servable: Servable<ServableAssets>,
  signature: Signature,
  request: InferRequest,
): Record<string, Tensor> {
  checkInputsAsTriton(servable.name, request.id, signature, request.inputs);
  const inputs: Record<string, Tensor> = {};
  for (const input of request.inputs) inputs[input.name] = input.tensor;
  for (const output of request.outputs ?? []) {
    if (!Object.hasOwn(signature.outputs, output.name)) {
      throw invalidArgument(
        `unexpected inference output '${output.name}' for model '${servable.name}'; its outputs are: ${Object.keys(signature.outputs).join(', ')}`,
      );
    }
  }
  return inputs;
}

/** The response's outputs: as run, or as classification strings where the request asked for them. */
function inferOutputs(
  servable: Servable<ServableAssets>,
  signature: Signature,
  request: InferRequest,
  names: readonly string[],
  outputs: Readonly<Record<string, Tensor>>,
): InferResponse['outputs'] {
  const batching = batchesAlongDimension0(signature);
  const labels = servable.assets?.vision.labels;
  const labelled = labelledOutput(signature, servable.assets);
  const offset =
    servable.assets?.vision.config?.postprocess?.kind === 'classification'
      ? (servable.assets.vision.config.postprocess.labelOffset ?? 0)
      : 0;
  return names.map((name, i) => {
    const tensor = outputs[name]!;
    const k = request.outputs?.[i]?.classification ?? 0;
    if (k === 0) return { name, tensor };
    try {
      return {
        name,
        tensor: classificationTensor(tensor, k, {
          batched: batching,
          label:
            name === labelled && labels !== undefined ? (index) => labels.get(index + offset) : undefined,
        }),
      };
    } catch (error) {
      if (error instanceof ServingError) throw invalidArgument(`output '${name}': ${error.message}`);
      throw error;
    }
  });
}

/** One inference on the pinned version: inputs checked, run, outputs encoded by the binding. */
async function inferOn<T>(
  servable: Servable<ServableAssets>,
  request: InferRequest,
  call: InferCall<T>,
): Promise<T> {
  const { name: signatureName, signature } = servable.signature();
  const inputs = inferInputs(servable, signature, request);
  const names = request.outputs?.map((o) => o.name) ?? Object.keys(signature.outputs);
  const outputs = await servable.predict(
    {
      inputs,
      outputFilter: request.outputs === undefined ? undefined : names,
      signatureName,
      ownedBuffers: call.ownedBuffers,
      outputLease: call.outputLease,
    },
    { signal: call.signal, deadline: call.deadline, arrivedAt: call.arrivedAt },
  );
  const response: InferResponse = {
    modelName: servable.name,
    modelVersion: String(servable.version),
    id: request.id,
    outputs: inferOutputs(servable, signature, request, names, outputs),
  };
  return call.encode(response);
}

function statisticsOf(
  service: Service,
  statistics: InferenceStatisticsReader,
  ref: KServeModelRef | undefined,
): { model_stats: Record<string, unknown>[] } {
  const entries: Record<string, unknown>[] = [];
  const add = (name: string, version: number): void => {
    entries.push(modelStatisticsJson(name, version, statistics.snapshot(name, version)));
  };
  if (ref === undefined) {
    for (const name of service.modelNames()) for (const v of availableVersions(service, name)) add(name, v);
  } else {
    const version = parseVersion(ref.version);
    const statuses = service.status({ name: ref.name, version });
    if (version !== undefined) add(ref.name, version);
    else {
      for (const v of statuses
        .filter((s) => s.state === 'AVAILABLE')
        .map((s) => s.version)
        .sort((a, b) => a - b))
        add(ref.name, v);
    }
  }
  return { model_stats: entries };
}

export function createKServeService(options: KServeServiceOptions): KServeService {
  const { service, registry, statistics } = options;
  const repository = createRepositoryControl({
    service,
    registry,
    roots: options.roots,
    mode: options.modelControl,
    rescan: options.rescan,
    logger: options.logger,
  });
  return {
    serverMetadata: () => ({
      name: 'visionserve',
      version: options.serverVersion,
      extensions: KSERVE_EXTENSIONS,
    }),
    serverLive: () => true,
    serverReady: () => serverReady(service),
    modelReady: (ref) => service.status(specOf(ref)).some((s) => s.state === 'AVAILABLE'),
    modelMetadata: (ref, signal) =>
      withModel(
        service,
        ref,
        (servable) =>
          Promise.resolve(
            modelMetadataJson(
              servable.name,
              ref.version === '' ? availableVersions(service, servable.name) : [servable.version],
              servable.signature().signature,
            ),
          ),
        { signal },
      ),
    modelConfig: (ref, signal) =>
      withModel(
        service,
        ref,
        (servable) =>
          Promise.resolve(
            modelConfigJson({
              name: servable.name,
              signature: servable.signature().signature,
              assets: servable.assets,
              versionPolicy: registry.modelConfig(servable.name)?.versionPolicy,
              maxBatchSize: options.maxBatchSize,
              instanceCount: options.instanceCount,
              dynamicBatching: options.dynamicBatching,
            }),
          ),
        { signal },
      ),
    admit(ref, call, body) {
      const spec = specOf(ref);
      try {
        return service.admit(spec, call, body);
      } catch (error) {
        throw notReady(service, error, spec);
      }
    },
    infer: (ref, request, call) =>
      withModel(service, ref, (servable) => inferOn(servable, request, call), call),
    inferOn,
    withServable: (ref, fn, call) => withModel(service, ref, fn, call),
    statistics: (ref) => statisticsOf(service, statistics, ref),
    repositoryIndex: (readyOnly) => repository.index(readyOnly),
    loadModel: (name, parameters) => repository.load(name, parameters),
    unloadModel: (name) => repository.unload(name),
  };
}
