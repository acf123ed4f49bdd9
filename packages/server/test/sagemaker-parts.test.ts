import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Code, ServingError } from '@visionserve/protocol';
import { configFromEnv } from '../src/config/env.js';
import { resolveServerConfig } from '../src/config/server-config.js';
import {
  csvToPredictBody,
  jsonLinesToPredictBody,
  jsonToPredictBody,
  negotiateResponse,
  requestKindFor,
} from '../src/frontends/sagemaker/content-types.js';
import { parseCustomAttributes } from '../src/frontends/sagemaker/custom-attributes.js';
import { resolveConfined, resolveModelLocation } from '../src/repository/confined-path.js';
import { readModelAssets } from '../src/repository/model-assets.js';
import { tempRepo } from './temp-repo.js';
import { TFOD_DETECTOR_VISION_CONFIG as DETECTOR_ENDPOINT_CONFIG } from '@visionserve/vision';

const code = (c: Code) => (e: unknown) => e instanceof ServingError && e.code === c;

describe('SageMaker parts: custom attributes, content types, Accept', () => {
  it('reads tfs-* pairs and ignores the rest', () => {
    assert.deepEqual(parseCustomAttributes(undefined), {
      modelName: undefined,
      modelVersion: undefined,
      method: undefined,
    });
    assert.deepEqual(
      parseCustomAttributes('trace=abc, tfs-model-name=m1 ,tfs-model-version=12,tfs-method=predict,tfs-x=y'),
      { modelName: 'm1', modelVersion: 12, method: 'predict' },
    );
    assert.throws(() => parseCustomAttributes('tfs-model-version=1.5'), code(Code.INVALID_ARGUMENT));
    assert.throws(() => parseCustomAttributes('tfs-method=explain'), code(Code.INVALID_ARGUMENT));
  });

  it('maps Content-Type to a request kind', () => {
    assert.equal(requestKindFor(undefined), 'json');
    assert.equal(requestKindFor('application/json; charset=utf-8'), 'json');
    assert.equal(requestKindFor('Application/JSONLines'), 'jsonlines');
    assert.equal(requestKindFor('application/jsons'), 'jsonlines');
    assert.equal(requestKindFor('text/csv'), 'csv');
    for (const t of ['application/x-image', 'image/jpeg', 'image/png', 'image/webp']) {
      assert.equal(requestKindFor(t), 'image');
    }
    assert.equal(requestKindFor('image/gif'), undefined);
    assert.equal(requestKindFor('text/plain'), undefined);
  });

  it('negotiates Accept', () => {
    assert.equal(negotiateResponse(undefined), 'json');
    assert.equal(negotiateResponse('*/*'), 'json');
    assert.equal(negotiateResponse('application/jsonlines'), 'jsonlines');
    assert.equal(negotiateResponse('application/json;q=0.5, application/jsonlines'), 'jsonlines');
    assert.equal(negotiateResponse('text/html'), undefined);
    assert.equal(negotiateResponse('application/json;q=0'), undefined);
  });

  it('turns JSON, JSON Lines and CSV into TF Serving predict bodies', () => {
    assert.deepEqual(jsonToPredictBody('{"inputs": {"a": 1}}'), { inputs: { a: 1 } });
    assert.deepEqual(jsonToPredictBody('{"examples": []}'), { examples: [] });
    assert.deepEqual(jsonToPredictBody('{"a": 1}'), { instances: [{ a: 1 }] });
    assert.deepEqual(jsonToPredictBody('[[1, 2]]'), { instances: [[1, 2]] });
    // The container wraps whatever does not start with a list of lists as one instance.
    assert.deepEqual(jsonToPredictBody('[1.0, 2.0, 5.0]'), { instances: [[1, 2, 5]] });
    assert.deepEqual(jsonToPredictBody('[{"a": 1}, {"a": 2}]'), { instances: [[{ a: 1 }, { a: 2 }]] });
    assert.deepEqual(jsonToPredictBody('5'), { instances: [5] });
    assert.deepEqual(jsonToPredictBody('{"a": 1}\n{"a": 2}'), { instances: [{ a: 1 }, { a: 2 }] });
    assert.deepEqual(jsonLinesToPredictBody('[1,2]\n\n[3,4]\n'), {
      instances: [
        [1, 2],
        [3, 4],
      ],
    });
    assert.throws(() => jsonLinesToPredictBody('[1]\n{'), /line 2/);
    assert.deepEqual(csvToPredictBody('1,2.5,-3e2\n"x, y",abc,""\n7\n'), {
      instances: [[1, 2.5, -300], ['x, y', 'abc', ''], 7],
    });
    assert.throws(() => csvToPredictBody('"open'), code(Code.INVALID_ARGUMENT));
    assert.throws(() => csvToPredictBody('\n\n'), /Empty CSV/);
  });
});

describe('SageMaker parts: path confinement and assets', () => {
  it('confines model files and model urls to their directories', async () => {
    const root = await tempRepo('vs-sm-paths-');
    const outside = await tempRepo('vs-sm-paths-out-');
    await mkdir(join(root, 'm', 'code'), { recursive: true });
    await writeFile(join(root, 'm', 'code', 'inference.mjs'), 'export function handler() {}');
    await writeFile(join(outside, 'secret.txt'), 'secret');
    await symlink(join(outside, 'secret.txt'), join(root, 'm', 'labels.txt'));
    await symlink(join(root, 'm', 'code'), join(root, 'm', 'code2'));
    assert.ok((await resolveConfined(join(root, 'm'), 'code/inference.mjs'))!.endsWith('inference.mjs'));
    assert.ok((await resolveConfined(join(root, 'm'), 'code2/inference.mjs'))!.endsWith('inference.mjs'));
    assert.equal(await resolveConfined(join(root, 'm'), 'nope.txt'), undefined);
    await assert.rejects(resolveConfined(join(root, 'm'), 'labels.txt'), code(Code.PERMISSION_DENIED));
    await assert.rejects(resolveConfined(join(root, 'm'), '../m/code'), code(Code.PERMISSION_DENIED));
    await assert.rejects(resolveConfined(join(root, 'm'), '/etc/passwd'), code(Code.PERMISSION_DENIED));

    assert.ok((await resolveModelLocation(join(root, 'm'), [root])).endsWith('/m'));
    await assert.rejects(resolveModelLocation(`${root}/m/../m`, [root]), code(Code.NOT_FOUND));
    await assert.rejects(resolveModelLocation(outside, [root]), code(Code.NOT_FOUND));
    await assert.rejects(
      resolveModelLocation(join(root, 'm', 'code', 'inference.mjs'), [root]),
      /not a directory/,
    );
  });

  it('reads visionserve.json with its labels and finds the handler module', async () => {
    const root = await tempRepo('vs-sm-assets-');
    await writeFile(join(root, 'labels.pbtxt'), 'item { id: 1 display_name: "person" }');
    await writeFile(
      join(root, 'visionserve.json'),
      JSON.stringify(DETECTOR_ENDPOINT_CONFIG).replace('mscoco_label_map.pbtxt', 'labels.pbtxt'),
    );
    await mkdir(join(root, 'code'));
    await writeFile(join(root, 'code', 'inference.js'), 'exports.handler = () => {};');
    const assets = await readModelAssets(root);
    assert.equal(assets.vision.labels?.get(1), 'person');
    assert.equal(assets.vision.config?.postprocess?.kind, 'detection');
    assert.ok(assets.handlerModulePath?.endsWith(join('code', 'inference.js')));
    await writeFile(join(root, 'code', 'inference.mjs'), 'export function handler() {}');
    assert.ok((await readModelAssets(root)).handlerModulePath?.endsWith('inference.mjs'));
    await writeFile(
      join(root, 'visionserve.json'),
      '{"postprocess": {"kind": "classification", "labels": "missing.txt"}}',
    );
    await assert.rejects(readModelAssets(root), /missing.txt/);
    await writeFile(join(root, 'visionserve.json'), '{');
    await assert.rejects(readModelAssets(root), /visionserve.json/);
  });
});

describe('SageMaker parts: configuration', () => {
  it('maps the SageMaker container variables', () => {
    const env = configFromEnv({
      SAGEMAKER_BIND_TO_PORT: '9090',
      SAGEMAKER_TFS_DEFAULT_MODEL_NAME: 'resnet',
      SAGEMAKER_MULTI_MODEL: 'True',
      SAGEMAKER_TFS_ENABLE_BATCHING: 'true',
      SAGEMAKER_TFS_MAX_BATCH_SIZE: '16',
      SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS: '2000',
      SAGEMAKER_TFS_NUM_BATCH_THREADS: '2',
      SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES: '4',
      SAGEMAKER_GUNICORN_WORKERS: '3',
      SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS: '90',
      SAGEMAKER_TFS_WAIT_TIME_SECONDS: '20',
    });
    const config = resolveServerConfig({}, env);
    assert.equal(config.sagemakerPort, 9090);
    assert.equal(config.sagemakerDefaultModelName, 'resnet');
    assert.equal(config.sagemakerMultiModel, true);
    assert.equal(config.enableBatching, true);
    assert.deepEqual(config.batchingEnvParameters, {
      maxBatchSize: 16,
      batchTimeoutMicros: 2000,
      numBatchThreads: 2,
      maxEnqueuedBatches: 4,
    });
    assert.equal(config.sagemakerHandlerWorkers, 3);
    assert.equal(config.sagemakerRequestTimeoutMs, 90_000);
    assert.equal(config.sagemakerModelLoadTimeoutMs, 20_000);
    assert.deepEqual(config.sagemakerModelRoots, ['/opt/ml/models']);
    assert.throws(() => configFromEnv({ SAGEMAKER_MULTI_MODEL: 'yes please' }), /SAGEMAKER_MULTI_MODEL/);
    const defaults = resolveServerConfig({ modelConfigFile: '/srv/models/models.config' });
    assert.equal(defaults.sagemakerPort, 8080);
    assert.equal(defaults.sagemakerMaxBodyBytes, 100 * 1024 * 1024);
    assert.deepEqual(defaults.sagemakerModelRoots, ['/opt/ml/models', '/srv/models']);
    assert.equal(defaults.batchingEnvParameters, undefined);
    assert.throws(() => resolveServerConfig({ sagemakerPort: 8501 }), /sagemaker_port/);
  });
});
