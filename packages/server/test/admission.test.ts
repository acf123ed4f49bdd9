/**
 * Admission control in core: a request is checked at its headers (`admit`, on the service
 * or on the pinned servable) and counted as queued model work only once its tensors are
 * decoded; by default requests queue as in TF Serving, refused only when the queue is full
 * or their deadline is out of reach, and a burst per instance passes any wait limit.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import { createInferenceService } from '../src/core/create-inference-service.js';
import { createModelManager } from '../src/core/model-manager.js';
import { createPendingRuns } from '../src/core/pending-admissions.js';
import type { Session, SessionFactory, SessionPressure } from '../src/core/session.js';
import { FAKE_SIGNATURE, createFakeDisk, createMemoryLogger, floatInput, sleep } from './fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { modelManagerSettings } from '../src/compose/config-settings.js';

/**
 * A session with `queued` runs waiting (settable), each adding 100 ms of estimated wait, on
 * `instances` instances, holding at most `maxQueued`.
 */
function fakeFactory(): SessionFactory & {
  asked: number[];
  queued: number;
  instances: number;
  maxQueued: number;
} {
  const asked: number[] = [];
  const factory = {
    asked,
    queued: 0,
    instances: 1,
    maxQueued: 1000,
    load() {
      const session: Session = {
        signature: FAKE_SIGNATURE,
        run(inputs: Readonly<Record<string, Tensor>>) {
          return Promise.resolve({
            y: inputs.x!,
            version: { dtype: 'int32', shape: [1], data: Int32Array.of(1) },
          });
        },
        pressure(extra = 0): SessionPressure {
          asked.push(extra);
          const queued = factory.queued + extra;
          return {
            queued,
            estimatedWaitMs: (queued * 100) / factory.instances,
            runMs: 100,
            instances: factory.instances,
            maxQueued: factory.maxQueued,
          };
        },
        close: () => Promise.resolve(),
      };
      return Promise.resolve(session);
    },
  };
  return factory;
}

async function setup(
  maxQueueWaitMs: number,
  onShed?: (model: string, error: ServingError) => void,
  burstPerInstance = 0,
  minArrivalBytesPerSecond = 0,
) {
  const factory = fakeFactory();
  const logger = createMemoryLogger();
  const manager = createModelManager({
    ...modelManagerSettings(DEFAULTS),
    sessionFactory: factory,
    listVersions: (p) => createFakeDisk({ '/models/m': [1] }).listVersions(p),
    logger,
  });
  const service = createInferenceService({
    manager,
    logger,
    admission: { maxQueueWaitMs, burstPerInstance, minArrivalBytesPerSecond, onShed },
  });
  await service.reloadConfig([
    {
      name: 'm',
      basePath: '/models/m',
      versionPolicy: { kind: 'latest', numVersions: 1 },
      versionLabels: {},
    },
  ]);
  return { service, factory, manager };
}

const overloaded = (e: unknown): boolean =>
  e instanceof ServingError && e.code === Code.UNAVAILABLE && e.reason === 'overloaded';

describe('admission', () => {
  it('counts bodies on their way only while they arrive at the minimum rate: 100 trickling ones refuse no one', async () => {
    const { service, factory, manager } = await setup(250, undefined, 0, 1000);
    const trickling = { received: () => 0, total: 600_000 };
    // Two at a time (within the limit while their first bytes are awaited), 100 in all: had
    // they kept counting, the second pair would already have been refused.
    const releases: (() => void)[] = [];
    for (let i = 0; i < 50; i++) {
      releases.push(service.admit({ name: 'm' }, {}, trickling), service.admit({ name: 'm' }, {}, trickling));
      await sleep(110); // 0 bytes after the 100 ms grace: below 1000 bytes/s, no longer counted
    }
    const pinned = await service.withServable({ name: 'm' }, (servable) => {
      servable.admit({}, trickling)();
      return Promise.resolve(servable.version);
    });
    assert.equal(pinned, 1);
    assert.equal(factory.asked.at(-1), 0, 'no trickling body counted');
    // Bodies arriving fast are work that exists: the third makes 300 ms (limit 250).
    let received = 1;
    const fast = { received: () => received, total: 600_000 };
    releases.push(service.admit({ name: 'm' }, {}, fast), service.admit({ name: 'm' }, {}, fast));
    service.admit({ name: 'm' }, {}, fast);
    assert.throws(() => service.admit({ name: 'm' }, {}, fast), overloaded);
    // Once complete (or released), a body no longer counts: its run is in the queue then.
    received = 600_000;
    service.admit({ name: 'm' });
    for (const release of releases) release();
    // Real queued work is refused: 3 runs waiting (300 ms) over the 250 ms limit.
    factory.queued = 3;
    assert.throws(() => service.admit({ name: 'm' }), overloaded);
    await assert.rejects(
      service.predict({ model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } }),
      overloaded,
    );
    factory.queued = 2;
    await service.predict({ model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } });
    await manager.close();
  });

  it('queues a burst per instance whatever the wait limit, and refuses beyond it', async () => {
    const { service, factory, manager } = await setup(100, undefined, 4);
    factory.instances = 2;
    // 8 runs waiting on 2 instances: 400 ms estimated, over the 100 ms limit, but within the burst.
    factory.queued = 8;
    service.admit({ name: 'm' });
    factory.queued = 9;
    assert.throws(() => service.admit({ name: 'm' }), overloaded);
    await manager.close();
  });

  it('by default (no wait limit) refuses only a full queue or a deadline out of reach', async () => {
    const { service, factory, manager } = await setup(0);
    factory.queued = 500;
    service.admit({ name: 'm' });
    // 500 runs × 100 ms ahead: a deadline 10 s away cannot be met, one 60 s away can.
    assert.throws(() => service.admit({ name: 'm' }, { deadline: Date.now() + 10_000 }), /deadline/);
    service.admit({ name: 'm' }, { deadline: Date.now() + 60_000 });
    factory.maxQueued = 500;
    assert.throws(
      () => service.admit({ name: 'm' }),
      (e: unknown) => overloaded(e) && /Queue is full/.test(String(e)),
    );
    await manager.close();
  });

  it('never starts a request whose deadline has passed, even on an idle model (DEADLINE_EXCEEDED)', async () => {
    const { service, factory, manager } = await setup(0);
    factory.queued = 0;
    assert.throws(
      () => service.admit({ name: 'm' }, { deadline: Date.now() - 1 }),
      (e: unknown) => e instanceof ServingError && e.code === Code.DEADLINE_EXCEEDED,
    );
    service.admit({ name: 'm' }, { deadline: Date.now() + 1000 });
    await manager.close();
  });

  it('tells the policy of every refusal, with the error the caller gets', async () => {
    const told: [string, ServingError][] = [];
    const { service, factory, manager } = await setup(150, (model, error) => told.push([model, error]));
    factory.queued = 1;
    service.admit({ name: 'm' });
    assert.equal(told.length, 0);
    factory.queued = 2;
    let thrown: unknown;
    try {
      service.admit({ name: 'm' });
    } catch (error) {
      thrown = error;
    }
    assert.ok(overloaded(thrown));
    assert.equal(told.length, 1);
    assert.equal(told[0]![0], 'm');
    assert.equal(told[0]![1], thrown);
    await manager.close();
  });

  it('answers NOT_FOUND for unknown models and versions at once', async () => {
    const { service, manager } = await setup(0);
    const notFound = (e: unknown): boolean => e instanceof ServingError && e.code === Code.NOT_FOUND;
    assert.throws(() => service.admit({ name: 'nope' }), notFound);
    assert.throws(() => service.admit({ name: 'm', version: 7 }), notFound);
    await manager.close();
  });

  it('counts adapting requests until each leaves, and arriving bodies while fast and incomplete', async () => {
    const pending = createPendingRuns(1000);
    const session = {} as Session;
    const leave = pending.enter(session);
    pending.enter(session);
    assert.equal(pending.count(session), 2);
    leave();
    leave();
    assert.equal(pending.count(session), 1);
    assert.equal(pending.count({} as Session), 0);
    let fast = 0;
    const stop = pending.arriving(session, { received: () => fast, total: 10_000 });
    pending.arriving(session, { received: () => 1, total: 10_000 });
    pending.arriving(session, { received: () => 1, total: undefined });
    assert.equal(pending.count(session), 4, 'at once, every body counts');
    await sleep(250);
    fast = 5000;
    assert.equal(pending.count(session), 2, 'the fast body counts, the slow ones (1 byte in 250 ms) not');
    fast = 10_000;
    assert.equal(pending.count(session), 1, 'a complete body no longer counts');
    fast = 5000;
    stop();
    assert.equal(pending.count(session), 1);
    assert.equal(createPendingRuns(0).count(session), 0);
  });

  it('counts a body that is in and waits to be decoded until its release, however slowly it came', async () => {
    const pending = createPendingRuns(1000);
    const session = {} as Session;
    let received = 0;
    let decoding = false;
    const decoded = pending.arriving(session, {
      received: () => received,
      total: 10_000,
      decoding: () => decoding,
    });
    await sleep(250);
    assert.equal(pending.count(session), 0, 'a trickle (nothing in 250 ms) is not queued work');
    received = 10_000;
    assert.equal(pending.count(session), 0, 'complete, not yet waiting for its decode');
    decoding = true;
    assert.equal(pending.count(session), 1, 'in and waiting for its decode thread: work that exists');
    decoded();
    assert.equal(pending.count(session), 0);
  });
});
