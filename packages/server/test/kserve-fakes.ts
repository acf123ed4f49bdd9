/**
 * Fake models behind the KServe bindings' tests (HTTP and gRPC): a registry and a scoped
 * fake core over the same set. half: y = x / 2 + 2 (float32 [-1]); cls: a batching
 * classifier with labels (scores = x, [-1, 4]); echo: every datatype back; boom: an
 * internal fault; slow: never answers until aborted. Not a test file itself.
 */
import { Code, ServingError, type Tensor, notFound } from '@visionserve/protocol';
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import type { CallOptions, ModelSpec, PredictRequest } from '../src/core/inference-service.js';
import type { ModelConfig } from '../src/core/model-config.js';
import type { ModelRegistry } from '../src/core/model-registry.js';
import type { Signature } from '../src/core/signature.js';
import { fakeInferenceService } from './fakes.js';

const PREDICT = 'tensorflow/serving/predict';
export const HALF: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1] } },
  outputs: { y: { name: 'y', dtype: 'float32', shape: [-1] } },
  methodName: PREDICT,
};
/** A batching classifier: scores = x. */
export const CLS: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1, 4] } },
  outputs: { scores: { name: 'scores', dtype: 'float32', shape: [-1, 4] } },
  methodName: PREDICT,
};
/** Echoes every datatype. */
export const ECHO: Signature = {
  inputs: {
    b: { name: 'b', dtype: 'bool', shape: [-1] },
    s: { name: 's', dtype: 'string', shape: [-1] },
    h: { name: 'h', dtype: 'float16', shape: [-1] },
    l: { name: 'l', dtype: 'uint64', shape: [-1] },
  },
  outputs: {
    b_out: { name: 'b_out', dtype: 'bool', shape: [-1] },
    s_out: { name: 's_out', dtype: 'string', shape: [-1] },
    h_out: { name: 'h_out', dtype: 'float16', shape: [-1] },
    l_out: { name: 'l_out', dtype: 'uint64', shape: [-1] },
  },
  methodName: PREDICT,
};
export const LABELS: ServableAssets = {
  vision: {
    config: { postprocess: { kind: 'classification', labels: 'labels.txt', labelOffset: 0 } },
    labels: new Map([
      [0, 'zero'],
      [1, 'one'],
      [2, 'two'],
      [3, 'three'],
    ]),
  },
  handlerModulePath: undefined,
};

/** Configured models: name -> signature (a registry and a service over the same set). */
export const models = new Map<
  string,
  { signature: Signature; config: ModelConfig; assets?: ServableAssets }
>();
const configOf = (name: string, basePath = `/models/${name}`): ModelConfig => ({
  name,
  basePath,
  versionPolicy: { kind: 'latest', numVersions: 1 },
  versionLabels: {},
});
export const addFake = (name: string, signature: Signature, assets?: ServableAssets): void => {
  models.set(name, { signature, config: configOf(name), ...(assets ? { assets } : {}) });
};

function resolve(spec: ModelSpec): { version: number; signature: Signature; assets?: ServableAssets } {
  const m = models.get(spec.name);
  if (m === undefined) throw notFound(`Servable not found for request: Latest(${spec.name})`);
  if (spec.version !== undefined && spec.version !== 1) {
    throw notFound(`Servable not found for request: Specific(${spec.name}, ${spec.version})`);
  }
  return { version: 1, signature: m.signature, ...(m.assets ? { assets: m.assets } : {}) };
}

/** Every predict the fake core ran, newest last. */
export const seen: PredictRequest[] = [];

function run(
  req: PredictRequest,
  options?: CallOptions,
): Promise<{
  model: { name: string; version: number; signatureName: string };
  outputs: Record<string, Tensor>;
}> {
  seen.push(req);
  const name = req.model.name;
  const model = { name, version: 1, signatureName: 'serving_default' };
  if (name === 'boom') return Promise.reject(new Error('secret /path exploded'));
  if (name === 'slow') {
    return new Promise((_, reject) => {
      options?.signal?.addEventListener('abort', () => {
        reject(options.signal?.reason instanceof Error ? options.signal.reason : new Error('aborted'));
      });
    });
  }
  let outputs: Record<string, Tensor>;
  if (name === 'cls') outputs = { scores: req.inputs['x']! };
  else if (name === 'echo') {
    outputs = Object.fromEntries(Object.entries(req.inputs).map(([k, t]) => [`${k}_out`, t]));
  } else {
    const x = req.inputs['x']!;
    outputs = {
      y: { dtype: 'float32', shape: x.shape, data: (x.data as Float32Array).map((v) => v / 2 + 2) },
    };
  }
  const filter = req.outputFilter;
  if (filter !== undefined && filter.length > 0) {
    outputs = Object.fromEntries(Object.entries(outputs).filter(([k]) => filter.includes(k)));
  }
  return Promise.resolve({ model, outputs });
}

export const service = fakeInferenceService<ServableAssets>({
  resolve,
  run,
  status(spec) {
    // Version 2 of "cls" is still loading.
    if (spec.name === 'cls' && spec.version === 2) return [{ version: 2, state: 'LOADING' }];
    resolve(spec);
    return [{ version: 1, state: 'AVAILABLE' }];
  },
  modelNames: () => [...models.keys()],
});
export const registry: ModelRegistry = {
  modelConfig: (name) => models.get(name)?.config,
  addModel(config) {
    if (models.has(config.name)) return Promise.reject(new ServingError(Code.ALREADY_EXISTS, 'exists'));
    models.set(config.name, { signature: HALF, config });
    return Promise.resolve();
  },
  removeModel(name) {
    if (!models.delete(name)) return Promise.reject(notFound(`no ${name}`));
    return Promise.resolve();
  },
};
