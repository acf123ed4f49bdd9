import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError } from '@visionserve/protocol';
import { createInferenceService } from '../src/core/create-inference-service.js';
import type { InferenceService } from '../src/core/inference-service.js';
import type { ModelConfig } from '../src/core/model-config.js';
import { createInferenceStatistics } from '../src/core/inference-statistics.js';
import { type ModelManager, createModelManager } from '../src/core/model-manager.js';
import {
  FAKE_SIGNATURE,
  type FakeSessionFactory,
  createFakeDisk,
  createFakeSessionFactory,
  createMemoryLogger,
  floatInput,
  sleep,
} from './fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { modelManagerSettings } from '../src/compose/config-settings.js';

const CONFIG: ModelConfig = {
  name: 'm',
  basePath: '/models/m',
  versionPolicy: { kind: 'all' },
  versionLabels: { stable: 1 },
};

async function setup(): Promise<{
  service: InferenceService;
  manager: ModelManager<undefined>;
  factory: FakeSessionFactory;
  logger: ReturnType<typeof createMemoryLogger>;
}> {
  const factory = createFakeSessionFactory();
  const disk = createFakeDisk({ '/models/m': [1, 2], '/models/n': [7] });
  const logger = createMemoryLogger();
  const manager = createModelManager({
    ...modelManagerSettings(DEFAULTS),
    sessionFactory: factory,
    listVersions: (p) => disk.listVersions(p),
    logger,
  });
  const service = createInferenceService({ manager, logger });
  await service.reloadConfig([CONFIG]);
  return { service, manager, factory, logger };
}

function isError(code: Code, message: string | RegExp) {
  return (e: unknown): boolean =>
    e instanceof ServingError &&
    e.code === code &&
    (typeof message === 'string' ? e.message === message : message.test(e.message));
}

/** close() only resolves once every handle was released. */
async function closesPromptly(manager: ModelManager<undefined>): Promise<void> {
  const timeout = sleep(2000).then(() => 'timeout');
  assert.notEqual(
    await Promise.race([manager.close().then(() => 'closed'), timeout]),
    'timeout',
    'a handle leaked',
  );
}

void describe('createInferenceService', () => {
  void it('predicts with the latest version by default and by version / label', async () => {
    const { service, manager } = await setup();
    const res = await service.predict({ model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } });
    assert.deepEqual(res.model, { name: 'm', version: 2, signatureName: 'serving_default' });
    assert.deepEqual([...(res.outputs.y?.data as Float32Array)], [1, 2]);
    assert.deepEqual(Object.keys(res.outputs).sort(), ['version', 'y']);
    const byLabel = await service.predict({
      model: { name: 'm', label: 'stable', signatureName: '' },
      inputs: { x: floatInput([[1, 2]]) },
    });
    assert.equal(byLabel.model.version, 1);
    const byVersion = await service.predict({
      model: { name: 'm', version: 1 },
      inputs: { x: floatInput([]) },
    });
    assert.equal(byVersion.model.version, 1);
    await closesPromptly(manager);
  });

  void it('applies and validates the output filter', async () => {
    const { service, manager, factory } = await setup();
    const res = await service.predict({
      model: { name: 'm' },
      inputs: { x: floatInput([[1, 2]]) },
      outputFilter: ['version'],
    });
    assert.deepEqual(Object.keys(res.outputs), ['version']);
    assert.deepEqual(factory.runOptions.at(-1)?.outputNames, ['version']);
    await assert.rejects(
      service.predict({ model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) }, outputFilter: ['nope'] }),
      isError(
        Code.INVALID_ARGUMENT,
        'output tensor alias not found in signature: nope Outputs expected to be in the set {y, version}.',
      ),
    );
    await closesPromptly(manager);
  });

  void it('rejects other signature names, bad inputs and unknown models with TF Serving messages', async () => {
    const { service, manager } = await setup();
    const x = floatInput([[1, 2]]);
    await assert.rejects(
      service.predict({ model: { name: 'm', signatureName: 'x' }, inputs: { x } }),
      isError(Code.FAILED_PRECONDITION, 'Serving signature key "x" not found.'),
    );
    await assert.rejects(
      service.predict({
        model: { name: 'm' },
        inputs: { x: { dtype: 'int32', shape: [1, 2], data: new Int32Array(2) } },
      }),
      isError(Code.INVALID_ARGUMENT, 'Input "x": expected dtype float32, got int32'),
    );
    await assert.rejects(
      service.predict({ model: { name: 'half' }, inputs: { x } }),
      isError(Code.NOT_FOUND, 'Servable not found for request: Latest(half)'),
    );
    await assert.rejects(
      service.predict({ model: { name: 'm', version: 3 }, inputs: { x } }),
      isError(Code.NOT_FOUND, 'Servable not found for request: Specific(m, 3)'),
    );
    await assert.rejects(
      service.predict({ model: { name: 'm', label: 'X' }, inputs: { x } }),
      isError(Code.INVALID_ARGUMENT, 'Unrecognized servable version label: X'),
    );
    await closesPromptly(manager);
  });

  void it('maps aborts: CANCELLED, DEADLINE_EXCEEDED, or the ServingError reason', async () => {
    const { service, manager, factory } = await setup();
    const x = (): ReturnType<typeof floatInput> => floatInput([[1, 2]]);
    const before = new AbortController();
    before.abort();
    await assert.rejects(
      service.predict({ model: { name: 'm' }, inputs: { x: x() } }, { signal: before.signal }),
      isError(Code.CANCELLED, /cancelled/),
    );
    await assert.rejects(
      service.predict(
        { model: { name: 'm' }, inputs: { x: x() } },
        { signal: AbortSignal.abort(new DOMException('timed out', 'TimeoutError')) },
      ),
      isError(Code.DEADLINE_EXCEEDED, /Deadline/),
    );

    factory.runDelayMs = 1000;
    const ctl = new AbortController();
    const started = Date.now();
    const pending = service.predict({ model: { name: 'm' }, inputs: { x: x() } }, { signal: ctl.signal });
    setTimeout(() => {
      ctl.abort(new ServingError(Code.DEADLINE_EXCEEDED, 'Timed out waiting for the batch'));
    }, 5);
    await assert.rejects(pending, isError(Code.DEADLINE_EXCEEDED, 'Timed out waiting for the batch'));
    assert.ok(Date.now() - started < 800, 'answered before the run finished');
    assert.equal(factory.runOptions.at(-1)?.signal, ctl.signal, 'the signal reaches the session');
    // The version stays acquired until the aborted run settles: unloading now must not close it mid-run.
    await service.reloadConfig([]);
    await closesPromptly(manager);
    assert.deepEqual(factory.closedWhileRunning, []);
  });

  void it('turns foreign session errors into INTERNAL without details', async () => {
    const { service, manager, factory, logger } = await setup();
    factory.runFailure = new Error('ORT: /secret/path failed');
    await assert.rejects(
      service.predict({ model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } }),
      isError(Code.INTERNAL, 'Internal error'),
    );
    assert.ok(
      logger.records.some((r) => r.level === 'error' && r.message === 'Internal error during inference'),
    );
    factory.runFailure = undefined;
    await closesPromptly(manager);
  });

  void it('records statistics for every request that runs a model, and every run', async () => {
    const factory = createFakeSessionFactory();
    const disk = createFakeDisk({ '/models/m': [1], '/models/b': [1] });
    const logger = createMemoryLogger();
    const manager = createModelManager({
      ...modelManagerSettings(DEFAULTS),
      sessionFactory: factory,
      listVersions: (p) => disk.listVersions(p),
      logger,
    });
    const statistics = createInferenceStatistics();
    const service = createInferenceService({ manager, logger, statistics });
    await service.reloadConfig([CONFIG]);
    factory.runDelayMs = 5;
    const arrivedAt = process.hrtime.bigint() - 1_000_000n;
    await service.predict({ model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } }, { arrivedAt });
    await service.withServable({ name: 'm' }, async (servable) => {
      await servable.predict({ inputs: { x: floatInput([[1, 2]]) } });
      await sleep(5); // encoding, after the run: compute_output
    });
    // A scope that never predicts (metadata) is not a request.
    await service.withServable({ name: 'm' }, (servable) => Promise.resolve(servable.signatures));
    // Malformed requests never reach the model: not counted (as in Triton).
    await assert.rejects(service.predict({ model: { name: 'm' }, inputs: { z: floatInput([[1, 2]]) } }));
    // A failing run and a cancelled request are failures.
    factory.runFailure = new ServingError(Code.INTERNAL, 'boom');
    await assert.rejects(service.predict({ model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } }));
    factory.runFailure = undefined;
    const controller = new AbortController();
    const cancelled = service.predict(
      { model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } },
      { signal: controller.signal },
    );
    controller.abort();
    await assert.rejects(cancelled);
    await sleep(10); // the cancelled run finishes in the background
    // Unknown versions never reach a version: nothing to count.
    await assert.rejects(service.predict({ model: { name: 'm', version: 9 }, inputs: {} }));

    const s = statistics.snapshot('m', 1);
    assert.equal(s.success.count, 2);
    assert.equal(s.fail.count, 2);
    assert.equal(s.queue.count, 2);
    assert.equal(s.inferenceCount, 2);
    assert.equal(s.executionCount, 2, 'the failed and the cancelled runs report no execution');
    assert.deepEqual(
      s.batches.map((b) => [b.batchSize, b.computeInfer.count]),
      [[1, 2]],
    );
    assert.ok(s.batches[0]!.computeInfer.ns >= 2 * 4e6, 'compute time from the runtime');
    // The parts add up to the success duration; the first request started 1 ms before its call.
    const parts = s.queue.ns + s.computeInput.ns + s.computeInfer.ns + s.computeOutput.ns;
    assert.ok(Math.abs(parts - s.success.ns) < 1e6, `${parts} vs ${s.success.ns}`);
    assert.ok(s.computeInput.ns >= 1e6);
    assert.ok(s.computeInfer.ns >= 2 * 4e6);
    assert.ok(s.computeOutput.ns >= 4e6);
    assert.ok(s.lastInferenceMs > 0);
    await closesPromptly(manager);
  });

  void it('serves signatures, status, model names and config reloads', async () => {
    const { service, manager } = await setup();
    const meta = await service.withServable({ name: 'm', version: 1 }, (s) =>
      Promise.resolve({ name: s.name, version: s.version, signatures: s.signatures }),
    );
    assert.deepEqual(meta, { name: 'm', version: 1, signatures: { serving_default: FAKE_SIGNATURE } });
    await assert.rejects(
      service.withServable({ name: 'q' }, () => Promise.resolve()),
      isError(Code.NOT_FOUND, 'Servable not found for request: Latest(q)'),
    );
    assert.deepEqual(service.status({ name: 'm' }), [
      { version: 2, state: 'AVAILABLE' },
      { version: 1, state: 'AVAILABLE' },
    ]);
    assert.deepEqual(service.status({ name: 'm', label: 'stable' }), [{ version: 1, state: 'AVAILABLE' }]);
    assert.throws(
      () => service.status({ name: 'm', label: 'nope' }),
      isError(Code.INVALID_ARGUMENT, /label: nope/),
    );
    await service.reloadConfig([
      {
        name: 'n',
        basePath: '/models/n',
        versionPolicy: { kind: 'latest', numVersions: 1 },
        versionLabels: {},
      },
    ]);
    assert.deepEqual(service.modelNames(), ['n']);
    assert.throws(
      () => service.status({ name: 'm' }),
      isError(Code.NOT_FOUND, 'Could not find any versions of model m'),
    );
    await closesPromptly(manager);
  });
});
