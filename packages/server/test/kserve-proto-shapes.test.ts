/**
 * The KServe operations' JSON (model metadata, configuration, statistics, repository index,
 * server metadata) must read as the `inference` protobuf messages (proto3 JSON, unknown fields
 * refused), so that the HTTP shapes use the wire names and types and a gRPC binding can convert
 * the same objects with fromJson.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type JsonValue, fromJson, toJson } from '@bufbuild/protobuf';
import {
  ModelConfigSchema,
  ModelMetadataResponseSchema,
  ModelStatisticsSchema,
  RepositoryIndexResponse_ModelIndexSchema,
  ServerMetadataResponseSchema,
} from '@visionserve/protocol/kserve-proto';
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import type { Signature } from '../src/core/signature.js';
import { KSERVE_EXTENSIONS } from '../src/frontends/kserve/kserve-service.js';
import { modelConfigJson, modelMetadataJson } from '../src/frontends/kserve/model-json.js';
import { modelStatisticsJson } from '../src/frontends/kserve/statistics-json.js';
import { createInferenceStatistics } from '../src/core/inference-statistics.js';

const SIG: Signature = {
  inputs: { images: { name: 'images', dtype: 'uint8', shape: [-1, -1, -1, 3] } },
  outputs: {
    scores: { name: 'scores', dtype: 'float32', shape: [-1, 10] },
    names: { name: 'names', dtype: 'string', shape: [-1, 1] },
  },
  methodName: 'tensorflow/serving/predict',
};
const ASSETS: ServableAssets = {
  vision: {
    config: {
      image: { layout: 'NHWC', dtype: 'uint8' },
      postprocess: { kind: 'classification', output: 'scores', labels: 'labels.txt' },
    },
    labels: new Map([[0, 'a']]),
  },
  handlerModulePath: undefined,
};
const strict = { ignoreUnknownFields: false };

describe('KServe JSON shapes read as the inference protobuf messages', () => {
  it('model configuration, with and without batching and dynamic batching', () => {
    for (const [versionPolicy, dynamicBatching] of [
      [{ kind: 'latest', numVersions: 2 }, false],
      [{ kind: 'all' }, true],
      [{ kind: 'specific', versions: [1, 3] }, false],
    ] as const) {
      const json = modelConfigJson({
        name: 'm',
        signature: SIG,
        assets: ASSETS,
        versionPolicy,
        maxBatchSize: 8,
        instanceCount: 2,
        dynamicBatching,
      });
      const message = fromJson(ModelConfigSchema, json as JsonValue, strict);
      assert.equal(message.maxBatchSize, 8);
      assert.deepEqual(message.input[0]!.dims, [-1n, -1n, 3n]);
      assert.equal(message.input[0]!.format, 1); // FORMAT_NHWC
      assert.equal(message.output[0]!.labelFilename, 'labels.txt');
      assert.equal(message.output[1]!.dataType, 13); // TYPE_STRING
      assert.equal(message.schedulingChoice.case, dynamicBatching ? 'dynamicBatching' : undefined);
      // Back to JSON the wire way: the same names and values (int64 as strings there).
      const back = toJson(ModelConfigSchema, message, { useProtoFieldName: true }) as Record<string, unknown>;
      assert.equal(back['name'], 'm');
    }
  });

  it('model metadata, statistics, repository index and server metadata', () => {
    fromJson(
      ModelMetadataResponseSchema,
      modelMetadataJson('m', [1, 2], SIG) as unknown as JsonValue,
      strict,
    );
    const stats = createInferenceStatistics({ now: () => 1234 });
    stats.recordSuccess('m', 1, { items: 2, totalNs: 10, inputNs: 1, queueNs: 0, inferNs: 7, outputNs: 2 });
    stats.recordExecution('m', 1, { batchSize: 2, computeNs: 6 });
    stats.recordFailure('m', 1, 5);
    const message = fromJson(
      ModelStatisticsSchema,
      modelStatisticsJson('m', 1, stats.snapshot('m', 1)) as JsonValue,
      strict,
    );
    assert.equal(message.inferenceStats!.success!.count, 1n);
    assert.equal(message.inferenceStats!.fail!.ns, 5n);
    assert.equal(message.batchStats[0]!.batchSize, 2n);
    assert.equal(message.lastInference, 1234n);
    for (const entry of [
      { name: 'a' },
      { name: 'b', version: '1', state: 'READY' },
      { name: 'c', state: 'UNAVAILABLE', reason: 'unloaded' },
    ]) {
      fromJson(RepositoryIndexResponse_ModelIndexSchema, entry, strict);
    }
    fromJson(
      ServerMetadataResponseSchema,
      { name: 'visionserve', version: '1', extensions: [...KSERVE_EXTENSIONS] },
      strict,
    );
  });
});
