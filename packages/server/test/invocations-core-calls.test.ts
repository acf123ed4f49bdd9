/**
 * The consolidation contract on the busiest SageMaker path: an /invocations JPEG is
 * decoded, run and answered as top-k with ONE scoped core call (withServable), so decode,
 * run and encode see one pinned version and its assets. Counting fake core, real HTTP.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import type { PredictRequest } from '../src/core/inference-service.js';
import type { ModelRegistry } from '../src/core/model-registry.js';
import type { Signature } from '../src/core/signature.js';
import { createHttpEdge } from '../src/frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from '../src/frontends/http/start-http-server.js';
import { createSageMakerApi, createSageMakerInvoker } from '../src/frontends/sagemaker/index.js';
import { createJsonLogger } from '../src/util/logger.js';
import { fakeInferenceService } from './fakes.js';
import { sharedImage } from './shared-models.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { httpServerSettings } from '../src/compose/config-settings.js';

const SIGNATURE: Signature = {
  inputs: { input: { name: 'input', dtype: 'float32', shape: [-1, 3, 224, 224] } },
  outputs: { output: { name: 'output', dtype: 'float32', shape: [-1, 1000] } },
  methodName: 'tensorflow/serving/predict',
};

const ASSETS: ServableAssets = {
  vision: {
    config: MOBILENET_V2_VISION_CONFIG,
    labels: new Map(Array.from({ length: 1000 }, (_, i) => [i, `class ${i}`])),
  },
  handlerModulePath: undefined,
};

describe('/invocations JPEG -> top-5 in one core call', () => {
  const runs: PredictRequest[] = [];
  const service = fakeInferenceService<ServableAssets>({
    resolve: () => ({ version: 3, signature: SIGNATURE, assets: ASSETS }),
    run(request) {
      runs.push(request);
      // Logits with a clear winner at 281 and four runners-up.
      const scores = new Float32Array(1000);
      for (const [i, v] of [
        [281, 9],
        [282, 7],
        [285, 6],
        [287, 5],
        [292, 4],
      ] as const)
        scores[i] = v;
      return Promise.resolve({
        model: { name: request.model.name, version: 3, signatureName: 'serving_default' },
        outputs: { output: { dtype: 'float32', shape: [1, 1000], data: scores } },
      });
    },
    modelNames: () => ['mobilenet'],
  });
  const registry: ModelRegistry = {
    modelConfig: () => undefined,
    addModel: () => Promise.resolve(),
    removeModel: () => Promise.resolve(),
  };
  let server: StartedHttpServer;
  let url: string;
  before(async () => {
    const logger = createJsonLogger({ level: 'silent' });
    server = await startHttpServer({
      ...httpServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      edge: createHttpEdge({
        apis: [
          createSageMakerApi({
            multiModel: DEFAULTS.sagemakerMultiModel,
            service,
            invoker: createSageMakerInvoker({
              service,
              logger,
              handlerHost: {
                invoke: () => Promise.reject(new Error('no handlers here')),
                forget: () => undefined,
                close: () => Promise.resolve(),
              },
              executionParameters: {
                MaxConcurrentTransforms: 1,
                BatchStrategy: 'MULTI_RECORD',
                MaxPayloadInMB: 6,
              },
            }),
            registry,
            logger,
            resolveModelLocation: () => Promise.reject(new Error('no multi-model')),
            maxModels: 0,
            memoryLimitBytes: 0,
            modelLoadTimeoutMs: 1000,
            bodyLimitBytes: 8 << 20,
            requestTimeoutMs: 30_000,
          }),
        ],
        logger,
        notFoundMessage: () => 'Not Found',
      }),
    });
    url = `http://127.0.0.1:${server.port}`;
  });
  after(() => server.close(1000));

  it('decodes, runs and answers top-5 with one withServable, admitted on it, and no other core call', async () => {
    const jpeg = await sharedImage('cat_tabby.jpg');
    const before = { ...service.calls };
    const res = await fetch(`${url}/invocations`, {
      method: 'POST',
      headers: { 'content-type': 'image/jpeg' },
      body: jpeg,
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const answer = JSON.parse(text) as { predictions: { class_id: number; label: string }[][] };
    const top = answer.predictions.flat();
    assert.deepEqual(
      top.map((p) => p.class_id),
      [281, 282, 285, 287, 292],
    );
    assert.equal(top[0]!.label, 'class 281');
    assert.equal(service.calls.withServable - before.withServable, 1);
    assert.equal(service.calls.predict - before.predict, 0);
    assert.equal(service.calls.status - before.status, 0);
    // Admitted once, on the version already pinned: no second acquire of it.
    assert.equal(service.calls.admit - before.admit, 0);
    assert.equal(service.calls.servableAdmit - before.servableAdmit, 1);
    assert.equal(runs.length, 1);
    // The run got the preprocessed image of the pinned version: NCHW float32 224x224.
    assert.equal(runs[0]!.model.version, 3);
    assert.deepEqual(runs[0]!.inputs['input']!.shape, [1, 3, 224, 224]);
  });
});
