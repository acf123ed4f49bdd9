import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError } from '@visionserve/protocol';
import {
  defaultBatchingParameters,
  resolveBatchingParameters,
  roundToAllowedBatchSize,
} from '../src/batching/batching-parameters.js';
import { configFromEnv } from '../src/config/env.js';
import { parseFlags } from '../src/config/flags.js';
import { resolveServerConfig } from '../src/config/server-config.js';
import { parseBatchingParameters } from '../src/repository/batching-parameters-file.js';

const invalid =
  (message: RegExp) =>
  (error: unknown): boolean => {
    assert.ok(error instanceof ServingError);
    assert.equal(error.code, Code.INVALID_ARGUMENT);
    assert.match(error.message, message);
    return true;
  };

const DEFAULTS = defaultBatchingParameters(2);

void describe('batching parameters', () => {
  void it('parses the TF Serving text format, wrapper messages and repeated sizes', () => {
    const parsed = parseBatchingParameters(`
      # a comment
      max_batch_size { value: 32 }
      batch_timeout_micros { value: 1000 }
      max_enqueued_batches { value: 4 }
      num_batch_threads { value: 2 }
      thread_pool_name { value: "model_server_batch_threads" }
      allowed_batch_sizes: 8
      allowed_batch_sizes: 16
      allowed_batch_sizes: 32
      pad_variable_length_inputs: true
      enable_large_batch_splitting { value: false }
    `);
    assert.deepEqual(parsed, {
      maxBatchSize: 32,
      batchTimeoutMicros: 1000,
      maxEnqueuedBatches: 4,
      numBatchThreads: 2,
      threadPoolName: 'model_server_batch_threads',
      enableLargeBatchSplitting: false,
      allowedBatchSizes: [8, 16, 32],
      padVariableLengthInputs: true,
    });
    const resolved = resolveBatchingParameters(DEFAULTS, [parsed]);
    assert.equal(resolved.maxExecutionBatchSize, 32);
    assert.deepEqual(parseBatchingParameters('max_batch_size: 4 allowed_batch_sizes: [2, 4]'), {
      maxBatchSize: 4,
      allowedBatchSizes: [2, 4],
    });
  });

  void it('reports unknown fields and bad values with positions', () => {
    assert.throws(
      () =>
        parseBatchingParameters('max_batch_size { value: 8 }\nmax_batch_sise { value: 8 }', {
          source: 'b.pbtxt',
        }),
      invalid(
        /^b\.pbtxt:2:1: Message type "tensorflow\.serving\.BatchingParameters" has no field named "max_batch_sise"/,
      ),
    );
    assert.throws(
      () => parseBatchingParameters('max_batch_size { value: "x" }'),
      invalid(/Expected integer, got: "x"/),
    );
  });

  void it('validates like TF Serving: allowed sizes increasing and ending at the largest batch', () => {
    assert.throws(
      () => resolveBatchingParameters(DEFAULTS, [{ maxBatchSize: 8, allowedBatchSizes: [4, 2, 8] }]),
      invalid(/strictly increasing/),
    );
    assert.throws(
      () => resolveBatchingParameters(DEFAULTS, [{ maxBatchSize: 8, allowedBatchSizes: [2, 4] }]),
      invalid(/last entry of allowed_batch_sizes \(4\) must equal max_batch_size \(8\)/),
    );
    assert.throws(
      () =>
        resolveBatchingParameters(DEFAULTS, [
          {
            maxBatchSize: 8,
            enableLargeBatchSplitting: true,
            maxExecutionBatchSize: 4,
            allowedBatchSizes: [2, 8],
          },
        ]),
      invalid(/must equal max_execution_batch_size \(4\)/),
    );
    assert.throws(() => resolveBatchingParameters(DEFAULTS, [{ maxBatchSize: 0 }]), invalid(/maxBatchSize/));
    assert.throws(
      () => resolveBatchingParameters(DEFAULTS, [{ maxBatchSize: 4, maxExecutionBatchSize: 8 }]),
      invalid(/must not exceed/),
    );
    assert.equal(roundToAllowedBatchSize([2, 4, 8], 3), 4);
    assert.equal(roundToAllowedBatchSize([], 3), 3);
  });

  void it('maps the SageMaker batching variables with the container defaults; the file wins', () => {
    assert.equal(configFromEnv({ SAGEMAKER_TFS_MAX_BATCH_SIZE: '4' }, 2).batchingEnvParameters, undefined);
    const env = configFromEnv({ SAGEMAKER_TFS_ENABLE_BATCHING: 'true' }, 3);
    assert.equal(env.enableBatching, true);
    assert.deepEqual(env.batchingEnvParameters, {
      maxBatchSize: 8,
      batchTimeoutMicros: 1000,
      numBatchThreads: 3,
      maxEnqueuedBatches: 3,
    });
    const set = configFromEnv(
      {
        SAGEMAKER_TFS_ENABLE_BATCHING: 'true',
        SAGEMAKER_TFS_MAX_BATCH_SIZE: '16',
        SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS: '500',
        SAGEMAKER_TFS_NUM_BATCH_THREADS: '1',
        SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES: '7',
      },
      2,
    );
    assert.deepEqual(set.batchingEnvParameters, {
      maxBatchSize: 16,
      batchTimeoutMicros: 500,
      numBatchThreads: 1,
      maxEnqueuedBatches: 7,
    });
    const bulk = configFromEnv({ SAGEMAKER_TFS_ENABLE_BATCHING: 'true', SAGEMAKER_BATCH: 'true' }, 2);
    assert.equal(bulk.batchingEnvParameters?.maxEnqueuedBatches, 100_000_000);
    const merged = resolveBatchingParameters(DEFAULTS, [set.batchingEnvParameters, { maxBatchSize: 4 }]);
    assert.equal(merged.maxBatchSize, 4);
    assert.equal(merged.batchTimeoutMicros, 500);
  });

  void it('parses the warmup and per-model batching flags', () => {
    const config = resolveServerConfig(
      parseFlags([
        '--enable_model_warmup=false',
        '--num_request_iterations_for_warmup=3',
        '--enable_per_model_batching_parameters',
      ]),
    );
    assert.equal(config.enableModelWarmup, false);
    assert.equal(config.numRequestIterationsForWarmup, 3);
    assert.equal(config.enablePerModelBatchingParameters, true);
    assert.equal(resolveServerConfig({}).enableModelWarmup, true);
  });
});
