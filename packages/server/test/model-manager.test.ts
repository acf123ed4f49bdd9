import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError } from '@visionserve/protocol';
import type { ModelConfig, VersionPolicy } from '../src/core/model-config.js';
import { type ModelManagerOptions, createModelManager } from '../src/core/model-manager.js';
import { selectAspiredVersions } from '../src/core/version-policy.js';
import {
  type FakeDisk,
  type FakeSessionFactory,
  createFakeDisk,
  createFakeSessionFactory,
  createMemoryLogger,
  deferred,
  floatInput,
  sleep,
  tick,
} from './fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { modelManagerSettings } from '../src/compose/config-settings.js';

function config(
  name: string,
  versionPolicy: VersionPolicy = { kind: 'latest', numVersions: 1 },
  versionLabels: Record<string, number> = {},
): ModelConfig {
  return { name, basePath: `/models/${name}`, versionPolicy, versionLabels };
}

function setup(
  dirs: Record<string, number[]>,
  extra: Partial<ModelManagerOptions<undefined>> = {},
): {
  factory: FakeSessionFactory;
  disk: FakeDisk;
  logger: ReturnType<typeof createMemoryLogger>;
  manager: ReturnType<typeof createModelManager>;
} {
  const factory = createFakeSessionFactory();
  const disk = createFakeDisk(dirs);
  const logger = createMemoryLogger();
  const manager = createModelManager({
    ...modelManagerSettings(DEFAULTS),
    sessionFactory: factory,
    listVersions: (p) => disk.listVersions(p),
    logger,
    ...extra,
  });
  return { factory, disk, logger, manager };
}

const states = (m: ReturnType<typeof createModelManager>, name: string): string[] =>
  m.status(name).map((s) => `${s.version}:${s.state}`);

function isError(code: Code, message: string | RegExp) {
  return (e: unknown): boolean =>
    e instanceof ServingError &&
    e.code === code &&
    (typeof message === 'string' ? e.message === message : message.test(e.message));
}

void describe('selectAspiredVersions', () => {
  void it('applies latest / all / specific', () => {
    assert.deepEqual(selectAspiredVersions({ kind: 'latest', numVersions: 1 }, [3, 1, 2]), [3]);
    assert.deepEqual(selectAspiredVersions({ kind: 'latest', numVersions: 2 }, [3, 1, 2]), [2, 3]);
    assert.deepEqual(selectAspiredVersions({ kind: 'latest', numVersions: 5 }, [1]), [1]);
    assert.deepEqual(selectAspiredVersions({ kind: 'latest', numVersions: 1 }, []), []);
    assert.deepEqual(selectAspiredVersions({ kind: 'all' }, [2, 1]), [1, 2]);
    assert.deepEqual(selectAspiredVersions({ kind: 'specific', versions: [3, 7, 1] }, [1, 2, 3]), [1, 3]);
  });
});

void describe('createModelManager', () => {
  void it('loads the versions each policy selects', async () => {
    const { manager } = setup({ '/models/a': [1, 2, 3], '/models/b': [1, 2, 3], '/models/c': [1, 2, 3] });
    await manager.setModels([
      config('a'),
      config('b', { kind: 'latest', numVersions: 2 }),
      config('c', { kind: 'specific', versions: [1, 3] }),
    ]);
    assert.deepEqual(states(manager, 'a'), ['3:AVAILABLE']);
    assert.deepEqual(states(manager, 'b'), ['3:AVAILABLE', '2:AVAILABLE']);
    assert.deepEqual(states(manager, 'c'), ['3:AVAILABLE', '1:AVAILABLE']);
    assert.deepEqual(manager.modelNames(), ['a', 'b', 'c']);
    const h = manager.acquire({ name: 'b' });
    assert.equal(h.version, 3);
    h.release();
    const h1 = manager.acquire({ name: 'c', version: 1 });
    assert.equal(h1.version, 1);
    h1.release();
    await manager.close();
  });

  void it('serves the old version until the new one is AVAILABLE, with no failed request', async () => {
    const { manager, factory, disk } = setup({ '/models/m': [1] });
    await manager.setModels([config('m')]);
    factory.runDelayMs = 2;

    let stop = false;
    const served: number[] = [];
    const failures: unknown[] = [];
    const client = async (): Promise<void> => {
      while (!stop) {
        try {
          const h = manager.acquire({ name: 'm' });
          try {
            const out = await h.session.run({ x: floatInput([[1, 2]]) });
            served.push((out.version?.data as Int32Array)[0]!);
          } finally {
            h.release();
          }
        } catch (error) {
          failures.push(error);
        }
        await tick();
      }
    };
    const clients = [client(), client(), client()];

    const gate = deferred();
    factory.loadGates.set('m:2', gate.promise);
    disk.dirs.set('/models/m', [1, 2]);
    const polled = manager.poll();
    // Waits for what the clients must see rather than a fixed time (a loaded box can stall 20 ms).
    const until = async (done: () => boolean): Promise<void> => {
      const deadline = Date.now() + 10_000;
      while (!done() && Date.now() < deadline) await sleep(5);
    };
    const before = served.length;
    await until(() => served.length > before + 3);
    assert.deepEqual(states(manager, 'm'), ['2:LOADING', '1:AVAILABLE']);
    assert.ok(served.length > 0 && !served.some((v) => v !== 1));
    gate.resolve();
    await polled;
    assert.equal(manager.status('m', 2)[0]?.state, 'AVAILABLE');
    await until(() => served.includes(2));
    stop = true;
    await Promise.all(clients);

    assert.deepEqual(failures, []);
    assert.ok(served.includes(2));
    assert.ok(factory.events.indexOf('load-done m:2') < factory.events.indexOf('close m:1'));
    assert.deepEqual(states(manager, 'm'), ['2:AVAILABLE', '1:END']);
    assert.deepEqual(factory.closedWhileRunning, []);
    await manager.close();
  });

  void it('unloads a removed model only after in-flight requests release it', async () => {
    const { manager, factory } = setup({ '/models/m': [1], '/models/n': [1] });
    await manager.setModels([config('m'), config('n')]);
    const h = manager.acquire({ name: 'm' });
    await manager.setModels([config('n')]);
    assert.deepEqual(manager.modelNames(), ['n']);
    assert.throws(
      () => manager.acquire({ name: 'm' }),
      isError(Code.NOT_FOUND, 'Servable not found for request: Latest(m)'),
    );
    await sleep(10);
    assert.ok(!factory.events.includes('close m:1'), 'closed while a handle was held');
    // The held session still works.
    const out = await h.session.run({ x: floatInput([[1, 2]]) });
    assert.ok(out.y);
    h.release();
    h.release(); // idempotent
    await manager.close();
    assert.ok(factory.events.includes('close m:1'));
    assert.deepEqual(factory.closedWhileRunning, []);
  });

  void it('keeps a failed load in END with its error; other versions keep serving', async () => {
    const { manager, factory, disk } = setup({ '/models/m': [1, 2] }, { maxLoadRetries: 0 });
    factory.failures.set('m:2', new ServingError(Code.INVALID_ARGUMENT, 'broken model file'));
    await manager.setModels([config('m', { kind: 'all' })]);
    assert.deepEqual(manager.status('m'), [
      { version: 2, state: 'END', error: { code: Code.INVALID_ARGUMENT, message: 'broken model file' } },
      { version: 1, state: 'AVAILABLE' },
    ]);
    const h = manager.acquire({ name: 'm' });
    assert.equal(h.version, 1);
    h.release();
    assert.throws(
      () => manager.acquire({ name: 'm', version: 2 }),
      isError(Code.NOT_FOUND, 'Servable not found for request: Specific(m, 2)'),
    );

    // A broken newest version under latest{1} does not take the serving one down.
    disk.dirs.set('/models/m', [1, 2, 3]);
    factory.failures.set('m:3', new Error('onnx parse error'));
    await manager.setModels([config('m')]);
    const s3 = manager.status('m', 3)[0];
    assert.equal(s3?.state, 'END');
    assert.equal(s3?.error?.code, Code.UNKNOWN);
    assert.match(
      s3?.error?.message ?? '',
      /Loading servable: \{name: m version: 3\} failed: onnx parse error/,
    );
    assert.equal(manager.status('m', 1)[0]?.state, 'AVAILABLE');
    await manager.poll(); // no retry (maxLoadRetries 0), no rejection
    assert.equal(factory.events.filter((e) => e === 'load-start m:3').length, 1);
    await manager.close();
  });

  void it('retries a failed load on later polls per the retry policy', async () => {
    const { manager, factory } = setup({ '/models/m': [1] }, { maxLoadRetries: 2, loadRetryIntervalMs: 0 });
    factory.failures.set('m:1', new Error('transient'));
    // TF Serving's reload reports a new model that did not become available (the set is applied).
    await assert.rejects(
      manager.setModels([config('m')]),
      isError(
        Code.UNKNOWN,
        '1 model(s) did not become available: {{{name: m version: 1} due to error: Loading servable: {name: m version: 1} failed: transient}, }',
      ),
    );
    assert.equal(manager.status('m')[0]?.state, 'END');
    await manager.poll();
    await manager.poll();
    await manager.poll(); // retries exhausted: 1 attempt + 2 retries
    assert.equal(factory.events.filter((e) => e === 'load-start m:1').length, 3);
    await manager.close();

    const second = setup({ '/models/m': [1] }, { maxLoadRetries: 1, loadRetryIntervalMs: 0 });
    second.factory.failures.set('m:1', new Error('transient'));
    await assert.rejects(
      second.manager.setModels([config('m')]),
      isError(Code.UNKNOWN, /did not become available/),
    );
    second.factory.failures.clear();
    await second.manager.poll();
    assert.deepEqual(states(second.manager, 'm'), ['1:AVAILABLE']);
    await second.manager.close();
  });

  void it('reloads a failed version whose directory disappeared and came back', async () => {
    const { manager, factory, disk } = setup({ '/models/m': [1] }, { maxLoadRetries: 0 });
    factory.failures.set('m:1', new Error('half-copied'));
    await assert.rejects(manager.setModels([config('m')]), isError(Code.UNKNOWN, /half-copied/));
    disk.dirs.set('/models/m', []);
    await manager.poll();
    factory.failures.clear();
    disk.dirs.set('/models/m', [1]);
    await manager.poll();
    assert.deepEqual(states(manager, 'm'), ['1:AVAILABLE']);
    await manager.close();
  });

  void it('resolves labels and refuses labels for unavailable versions', async () => {
    const { manager } = setup({ '/models/m': [1, 2] });
    await manager.setModels([config('m', { kind: 'all' }, { stable: 1, canary: 2 })]);
    const h = manager.acquire({ name: 'm', label: 'stable' });
    assert.equal(h.version, 1);
    h.release();
    assert.equal(manager.resolveVersionLabel('m', 'canary'), 2);
    assert.throws(
      () => manager.acquire({ name: 'm', label: 'beta' }),
      isError(Code.INVALID_ARGUMENT, 'Unrecognized servable version label: beta'),
    );
    assert.throws(
      () => manager.acquire({ name: 'zz', label: 'stable' }),
      isError(Code.INVALID_ARGUMENT, 'Unrecognized servable version label: stable'),
    );
    assert.throws(
      () => manager.acquire({ name: 'm', version: 1, label: 'stable' }),
      isError(Code.INVALID_ARGUMENT, /Both model version/),
    );

    await assert.rejects(
      manager.setModels([config('m', { kind: 'all' }, { stable: 1, canary: 9 })]),
      isError(
        Code.INVALID_ARGUMENT,
        'Request to assign label canary to version 9 of model m, which is not currently available for inference',
      ),
    );
    assert.equal(manager.resolveVersionLabel('m', 'canary'), 2, 'label map unchanged after a refused update');
    await manager.close();
  });

  void it('allows new labels for unavailable versions when configured', async () => {
    const { manager } = setup({ '/models/m': [1] }, { allowVersionLabelsForUnavailableModels: true });
    await manager.setModels([config('m', undefined, { stable: 1, next: 2 })]);
    assert.throws(
      () => manager.acquire({ name: 'm', label: 'next' }),
      isError(Code.NOT_FOUND, 'Servable not found for request: Specific(m, 2)'),
    );
    // An existing label may not be moved to an unavailable version.
    await assert.rejects(
      manager.setModels([config('m', undefined, { stable: 5, next: 2 })]),
      isError(Code.INVALID_ARGUMENT, /label stable to version 5/),
    );
    await manager.close();
  });

  void it('reports NOT_FOUND like TF Serving', async () => {
    const { manager } = setup({ '/models/m': [1] });
    await manager.setModels([config('m')]);
    assert.throws(
      () => manager.acquire({ name: 'half' }),
      isError(Code.NOT_FOUND, 'Servable not found for request: Latest(half)'),
    );
    assert.throws(
      () => manager.acquire({ name: 'm', version: 3 }),
      isError(Code.NOT_FOUND, 'Servable not found for request: Specific(m, 3)'),
    );
    assert.throws(
      () => manager.status('half'),
      isError(Code.NOT_FOUND, 'Could not find any versions of model half'),
    );
    assert.throws(
      () => manager.status('m', 3),
      isError(Code.NOT_FOUND, 'Could not find version 3 of model m'),
    );
    assert.deepEqual(manager.status('m', 1), [{ version: 1, state: 'AVAILABLE' }]);
    await manager.close();
  });

  void it('replaces the model set on setModels', async () => {
    const { manager, factory } = setup({ '/models/a': [1], '/models/b': [1], '/models/c': [4] });
    await manager.setModels([config('a'), config('b')]);
    await manager.setModels([config('c'), config('b')]);
    assert.deepEqual(manager.modelNames(), ['c', 'b']);
    await manager.ready();
    assert.throws(() => manager.status('a'), isError(Code.NOT_FOUND, /model a/));
    const h = manager.acquire({ name: 'c' });
    assert.equal(h.version, 4);
    h.release();
    assert.equal(factory.events.filter((e) => e === 'load-start b:1').length, 1, 'b is not reloaded');
    await manager.close();
    assert.ok(factory.events.includes('close a:1'));
  });

  void it('reports new and moved models that did not become available, as TF Serving reloads do', async () => {
    const { manager, factory } = setup(
      { '/models/a': [1], '/models/b': [2], '/v2/a': [3] },
      { maxLoadRetries: 0 },
    );
    await manager.setModels([config('a')]);
    // A kept model whose newer version fails is not reported; a new one that fails is.
    factory.failures.set('b:2', new Error('bad file'));
    await assert.rejects(
      manager.setModels([config('a'), config('b')]),
      isError(
        Code.UNKNOWN,
        /^1 model\(s\) did not become available: \{\{\{name: b version: 2\} due to error: .*bad file\}, \}$/,
      ),
    );
    assert.deepEqual(manager.modelNames(), ['a', 'b'], 'the new set is applied all the same');
    // A base path that moves to a version that fails: reported, and the old path keeps serving.
    factory.failures.set('a:3', new Error('truncated'));
    await assert.rejects(
      manager.setModels([{ ...config('a'), basePath: '/v2/a' }]),
      isError(Code.UNKNOWN, /\{name: a version: 3\} due to error: .*truncated/),
    );
    const h = manager.acquire({ name: 'a' });
    assert.equal(h.version, 1);
    h.release();
    await manager.close();
  });

  void it('rejects invalid configs without changing anything', async () => {
    const { manager } = setup({ '/models/a': [1] });
    await manager.setModels([config('a')]);
    await assert.rejects(
      manager.setModels([config('b'), config('b')]),
      isError(Code.INVALID_ARGUMENT, 'Illegal to list model b multiple times in config list'),
    );
    assert.deepEqual(manager.modelNames(), ['a']);
    await manager.close();
  });

  void it('serialises concurrent polls and setModels, and coalesces queued polls', async () => {
    const { manager, disk } = setup({ '/models/m': [1] });
    disk.listDelayMs = 5;
    const first = manager.setModels([config('m')]);
    const p1 = manager.poll();
    const p2 = manager.poll();
    const p3 = manager.poll();
    assert.equal(p2, p1);
    assert.equal(p3, p1);
    const p4 = manager.setModels([config('m')]);
    assert.equal(manager.poll(), p1, 'a poll still queued is shared');
    await Promise.all([first, p1, p4]);
    const p5 = manager.poll();
    assert.notEqual(p5, p1);
    await p5;
    assert.equal(disk.maxConcurrentListings, 1);
    assert.equal(disk.listings, 4);
    await manager.close();
  });

  void it('warns and keeps serving when the base path cannot be listed', async () => {
    const { manager, disk, logger } = setup({ '/models/m': [1] });
    await assert.rejects(
      manager.setModels([config('m'), config('gone')]),
      isError(
        Code.UNKNOWN,
        '1 model(s) did not become available: {{{name: gone} due to error: No versions of servable gone found under base path /models/gone}, }',
      ),
    );
    assert.ok(logger.records.some((r) => r.level === 'warn' && r.fields.model === 'gone'));
    assert.throws(() => manager.status('gone'), isError(Code.NOT_FOUND, /gone/));
    disk.dirs.delete('/models/m');
    await manager.poll();
    assert.deepEqual(states(manager, 'm'), ['1:AVAILABLE']);
    // An existing but empty base path unloads (TF Serving semantics).
    disk.dirs.set('/models/m', []);
    await manager.poll();
    await manager.close();
    assert.deepEqual(states(manager, 'm'), ['1:END']);
  });

  void it('close waits for in-flight handles and refuses new work', async () => {
    const { manager, factory } = setup({ '/models/m': [1] });
    await manager.setModels([config('m')]);
    const h = manager.acquire({ name: 'm' });
    let closed = false;
    const closing = manager.close().then(() => {
      closed = true;
    });
    await sleep(10);
    assert.equal(closed, false);
    assert.throws(() => manager.acquire({ name: 'm' }), isError(Code.UNAVAILABLE, /shutting down/));
    await assert.rejects(manager.setModels([]), isError(Code.UNAVAILABLE, /closed/));
    await manager.poll();
    h.release();
    await closing;
    assert.ok(factory.events.includes('close m:1'));
    assert.deepEqual(states(manager, 'm'), ['1:END']);
  });
  void it('addModel / removeModel change one model at a time (ModelRegistry)', async () => {
    const { manager, factory } = setup({ '/models/a': [1], '/models/b': [2] });
    await manager.setModels([config('a')]);
    await manager.addModel(config('b'));
    assert.deepEqual(manager.modelNames(), ['a', 'b']);
    assert.deepEqual(states(manager, 'b'), ['2:AVAILABLE']);
    assert.equal(manager.modelConfig('b')?.basePath, '/models/b');
    await assert.rejects(manager.addModel(config('b')), isError(Code.ALREADY_EXISTS, /already loaded/));
    // removeModel resolves only after in-flight requests released the version.
    const h = manager.acquire({ name: 'b' });
    let removed = false;
    const removing = manager.removeModel('b').then(() => {
      removed = true;
    });
    await sleep(10);
    assert.equal(removed, false);
    assert.deepEqual(manager.modelNames(), ['a']);
    assert.throws(() => manager.acquire({ name: 'b' }), isError(Code.NOT_FOUND, /Latest\(b\)/));
    h.release();
    await removing;
    assert.ok(factory.events.includes('close b:2'));
    assert.equal(manager.modelConfig('b'), undefined);
    await assert.rejects(manager.removeModel('b'), isError(Code.NOT_FOUND, /not loaded/));
    // A removed model can be added again and loads afresh.
    await manager.addModel(config('b'));
    assert.deepEqual(states(manager, 'b'), ['2:AVAILABLE']);
    assert.deepEqual(states(manager, 'a'), ['1:AVAILABLE']);
    await manager.close();
  });
});
