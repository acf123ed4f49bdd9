/**
 * Admission control in core: requests admitted before their body is read (`admit`) count
 * as queued until their run is submitted, so work that frontends are still reading and
 * decoding cannot pile up behind a queue that looks empty.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import { createInferenceService } from '../src/core/create-inference-service.js';
import { createModelManager } from '../src/core/model-manager.js';
import { createPendingAdmissions } from '../src/core/pending-admissions.js';
import type { Session, SessionFactory, SessionPressure } from '../src/core/session.js';
import { FAKE_SIGNATURE, createFakeDisk, createMemoryLogger, floatInput, sleep } from './fakes.js';

/** A session whose queue looks empty (runs never wait); each queued run adds 100 ms of estimated wait. */
function fakeFactory(): SessionFactory & { asked: number[] } {
  const asked: number[] = [];
  return {
    asked,
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
          return { queued: extra, estimatedWaitMs: extra * 100, runMs: 100 };
        },
        close: () => Promise.resolve(),
      };
      return Promise.resolve(session);
    },
  };
}

async function setup(maxQueueWaitMs: number, onShed?: (model: string, error: ServingError) => void) {
  const factory = fakeFactory();
  const logger = createMemoryLogger();
  const manager = createModelManager({
    sessionFactory: factory,
    listVersions: (p) => createFakeDisk({ '/models/m': [1] }).listVersions(p),
    logger,
  });
  const service = createInferenceService({ manager, logger, admission: { maxQueueWaitMs, onShed } });
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

describe('admission: requests admitted before their body is read', () => {
  it('count as queued until released, aborted or submitted', async () => {
    const { service, factory, manager } = await setup(250);
    const calls = Array.from({ length: 5 }, () => ({ signal: new AbortController() }));
    const admit = (i: number) => service.admit({ name: 'm' }, { signal: calls[i]!.signal.signal });
    // 0, 100 and 200 ms of estimated work ahead: admitted; the fourth would wait 300 ms.
    const releases = [admit(0), admit(1), admit(2)];
    assert.throws(() => admit(3), overloaded);
    assert.deepEqual(factory.asked, [0, 1, 2, 3]);
    // Released (the request ended before its run): room for one more.
    releases[0]!();
    releases[0]!(); // idempotent
    admit(3);
    assert.throws(() => admit(4), overloaded);
    // Aborted (the client left): room again.
    calls[1]!.signal.abort();
    admit(4);
    assert.throws(() => service.admit({ name: 'm' }, { signal: new AbortController().signal }), overloaded);
    // A predict of an admitted request does not count itself, then its run is queued in the session.
    factory.asked.length = 0;
    await service.predict(
      { model: { name: 'm' }, inputs: { x: floatInput([[1, 2]]) } },
      { signal: calls[2]!.signal.signal },
    );
    assert.deepEqual(factory.asked, [2], 'the two other admitted requests');
    admit(1);
    // Without a signal a request cannot be told apart later: checked, not counted.
    assert.throws(() => service.admit({ name: 'm' }), overloaded);
    await manager.close();
  });

  it('tells the policy of every refusal, with the error the caller gets', async () => {
    const told: [string, ServingError][] = [];
    const { service, manager } = await setup(150, (model, error) => told.push([model, error]));
    const admit = () => service.admit({ name: 'm' }, { signal: new AbortController().signal });
    admit();
    admit();
    assert.equal(told.length, 0);
    let thrown: unknown;
    try {
      admit();
    } catch (error) {
      thrown = error;
    }
    assert.ok(overloaded(thrown));
    assert.equal(told.length, 1);
    assert.equal(told[0]![0], 'm');
    assert.equal(told[0]![1], thrown);
    await manager.close();
  });

  it('answers NOT_FOUND for unknown models and versions at once; limits of 0 shed nothing', async () => {
    const { service, manager } = await setup(0);
    const notFound = (e: unknown): boolean => e instanceof ServingError && e.code === Code.NOT_FOUND;
    assert.throws(() => service.admit({ name: 'nope' }, { signal: new AbortController().signal }), notFound);
    assert.throws(() => service.admit({ name: 'm', version: 7 }), notFound);
    for (let i = 0; i < 50; i++) service.admit({ name: 'm' }, { signal: new AbortController().signal });
    await manager.close();
  });

  it('forgets entries after their time to live', async () => {
    const pending = createPendingAdmissions(20);
    const session = {} as Session;
    const a = new AbortController().signal;
    pending.add(session, a);
    pending.add(session, a);
    pending.add(session, new AbortController().signal);
    assert.equal(pending.count(session), 2);
    assert.equal(pending.count(session, a), 1);
    await sleep(40);
    assert.equal(pending.count(session), 0);
  });
});
