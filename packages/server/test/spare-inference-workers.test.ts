import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import type { Tensor } from '@visionserve/protocol';
import type { ModelSource } from '../src/core/session.js';
import { createOnnxSessionFactory } from '../src/runtime/onnx-session-factory.js';
import { startSpareInferenceWorkers } from '../src/runtime/spare-inference-workers.js';
import { silentLogger } from '../src/util/logger.js';
import { sharedModel, stageModel } from './shared-models.js';

const source = (modelName: string, basePath: string): ModelSource => ({
  modelName,
  version: 1,
  path: `${basePath}/1`,
  basePath,
});

/** mnist-8: Input3 float32 [1,1,28,28] -> Plus214_Output_0 float32 [1,10]. */
const digit = (): Record<string, Tensor> => ({
  Input3: { dtype: 'float32', shape: [1, 1, 28, 28], data: new Float32Array(28 * 28).fill(0.5) },
});

describe('spare inference workers', () => {
  it('serve the first loads: same signature and answers as fresh workers', async () => {
    const base = await stageModel('mnist', 1, sharedModel('mnist-8.onnx'));
    const spares = startSpareInferenceWorkers({ count: 3 });
    assert.equal(spares.idle, 3);
    const withSpares = createOnnxSessionFactory({ logger: silentLogger, instances: 2, spareWorkers: spares });
    const fresh = createOnnxSessionFactory({ logger: silentLogger, instances: 1 });
    const a = await withSpares.load(source('mnist', base));
    const b = await fresh.load(source('mnist', base));
    try {
      assert.equal(spares.idle, 1, 'two instances took two spares');
      assert.deepEqual(a.signature, b.signature);
      const outA = await a.run(digit());
      const outB = await b.run(digit());
      assert.deepEqual(outA['Plus214_Output_0']!.data, outB['Plus214_Output_0']!.data);
      // Both instances answer (concurrent runs go to idle workers).
      const both = await Promise.all([a.run(digit()), a.run(digit())]);
      for (const out of both) assert.deepEqual(out['Plus214_Output_0']!.data, outB['Plus214_Output_0']!.data);
      // Once the spares are gone, a load starts its own threads.
      await spares.close();
      assert.equal(spares.idle, 0);
      assert.equal(spares.take(), undefined);
      const c = await withSpares.load(source('mnist', base));
      assert.deepEqual((await c.run(digit()))['Plus214_Output_0']!.data, outB['Plus214_Output_0']!.data);
      await c.close();
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('report a broken model from a spare as a fresh worker does', async () => {
    const base = await stageModel('broken', 1, new TextEncoder().encode('this is not an onnx model'));
    const spares = startSpareInferenceWorkers({ count: 1 });
    const factory = createOnnxSessionFactory({ logger: silentLogger, instances: 1, spareWorkers: spares });
    const fresh = createOnnxSessionFactory({ logger: silentLogger, instances: 1 });
    const fromSpare = await factory.load(source('broken', base)).then(
      () => assert.fail('loaded a broken model'),
      (error: unknown) => error as Error,
    );
    const fromFresh = await fresh.load(source('broken', base)).then(
      () => assert.fail('loaded a broken model'),
      (error: unknown) => error as Error,
    );
    assert.equal(fromSpare.message, fromFresh.message);
    assert.equal(spares.idle, 0);
  });

  it('start more on add() until closed', async () => {
    const spares = startSpareInferenceWorkers({ count: 1 });
    spares.add(2);
    spares.add(0);
    spares.add(-1);
    assert.equal(spares.idle, 3);
    const taken = spares.take()!;
    assert.equal(spares.idle, 2);
    await spares.close();
    spares.add(2);
    assert.equal(spares.idle, 0, 'nothing starts after close');
    taken.postMessage({ type: 'close' });
    await new Promise((resolve) => taken.once('exit', resolve));
  });

  it('never keep the process alive, taken or not', () => {
    // A child that starts spares and returns: it must exit by itself, promptly.
    const url = new URL('../src/runtime/spare-inference-workers.js', import.meta.url).href;
    const child = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import(${JSON.stringify(url)}).then((m) => { m.startSpareInferenceWorkers({ count: 2 }); })`,
      ],
      { timeout: 30_000, encoding: 'utf8' },
    );
    assert.equal(child.signal, null, `the child had to be killed: ${child.stderr}`);
    assert.equal(child.status, 0, child.stderr);
  });
});
