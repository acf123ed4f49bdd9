/**
 * No gap at rollover or reload, on every path: mixed gRPC / REST / `/invocations` clients loop
 * on MobileNetV2 while (1) a new version directory appears every second and the previous one
 * is deleted (latest policy: every version is replaced while requests run), and (2) reloads
 * move the model's base path back and forth. Every request must succeed with the right answer.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type Tensor,
  type TfsGrpcClient,
  type TfsRestClient,
  createTfsGrpcClient,
  createTfsRestClient,
} from '@visionserve/client';
import { IMAGE_PRESETS, imageToTensor } from '@visionserve/client/image';
import { argmax, image } from './helpers/shared.js';
import { tempRepo } from './helpers/model-repo.js';
import { placeMobilenet, request } from './helpers/sagemaker-models.js';
import { type Harness, startHarness } from './helpers/server-harness.js';

const SWAPS = Number(process.env['VISIONSERVE_ROLLOVER_SWAPS'] ?? 5);
const RELOADS = Number(process.env['VISIONSERVE_ROLLOVER_RELOADS'] ?? 4);

interface Tally {
  ok: number;
  failures: string[];
  versions: Set<number>;
}

/** Loops `call` until `stop` resolves; records each outcome. */
async function loop(
  stop: { done: boolean },
  tally: Tally,
  call: () => Promise<number | undefined>,
): Promise<void> {
  while (!stop.done) {
    try {
      const version = await call();
      tally.ok++;
      if (version !== undefined) tally.versions.add(version);
    } catch (error) {
      tally.failures.push(error instanceof Error ? error.message : String(error));
    }
  }
}

describe('rollover and reload under mixed load (gRPC, REST, /invocations)', () => {
  let root: string;
  let h: Harness;
  let grpc: TfsGrpcClient;
  let rest: TfsRestClient;
  let cat: Tensor;
  let jpeg: Buffer;

  before(async () => {
    root = await tempRepo('vs-rollover-');
    await placeMobilenet(root, 'mobilenet');
    h = await startHarness({
      modelName: 'mobilenet',
      modelBasePath: join(root, 'mobilenet'),
      fileSystemPollSeconds: 1,
      sagemakerPort: 0,
      instances: 1,
    });
    grpc = createTfsGrpcClient({ address: `127.0.0.1:${h.server.ports.grpc!}`, defaultTimeoutMs: 30_000 });
    rest = createTfsRestClient({ baseUrl: h.rest, defaultTimeoutMs: 30_000 });
    jpeg = image('cat_tabby.jpg');
    cat = (await imageToTensor(jpeg, IMAGE_PRESETS.imagenet)).tensor;
  });
  after(async () => {
    grpc.close();
    rest.close();
    await h.close();
  });

  /** Six looping clients, two per path; each checks the answer is the tabby cat (281). */
  function startClients(stop: { done: boolean }, tally: Tally): Promise<void>[] {
    const top = (t: Tensor | undefined): number => argmax(t!.data as Float32Array);
    const viaGrpc = async (): Promise<number> => {
      const r = await grpc.predict('mobilenet', { input: cat });
      assert.equal(top(r.outputs['output']), 281);
      return Number(r.model.version);
    };
    const viaRest = async (): Promise<undefined> => {
      const r = await rest.predict('mobilenet', { input: cat });
      assert.equal(top(r.outputs['output']), 281);
      return undefined;
    };
    const viaInvocations = async (): Promise<undefined> => {
      const r = await request(`${h.sagemaker}/invocations`, {
        body: jpeg,
        headers: { 'Content-Type': 'application/x-image' },
      });
      if (r.status !== 200) throw new Error(`/invocations ${r.status}: ${r.text}`);
      const best = (r.json() as { predictions: { class_id: number }[][] }).predictions[0]![0]!;
      assert.equal(best.class_id, 281);
      return undefined;
    };
    return [viaGrpc, viaGrpc, viaRest, viaRest, viaInvocations, viaInvocations].map((call) =>
      loop(stop, tally, call),
    );
  }

  it('new versions replace old ones every second: no failed request on any path', async () => {
    const tally: Tally = { ok: 0, failures: [], versions: new Set() };
    const stop = { done: false };
    const clients = startClients(stop, tally);
    const base = join(root, 'mobilenet');
    let version = 1;
    while (version <= SWAPS) {
      await new Promise((r) => setTimeout(r, 1000));
      // Copy the version aside, then rename it into place: the server never sees half a model.
      const next = version + 1;
      await cp(join(base, String(version)), join(root, `staging-${next}`), { recursive: true });
      await rename(join(root, `staging-${next}`), join(base, String(next)));
      await rm(join(base, String(version)), { recursive: true });
      version = next;
    }
    // Let the last version come up and be served.
    const deadline = Date.now() + 30_000;
    while (!tally.versions.has(version) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    stop.done = true;
    await Promise.all(clients);
    console.log(
      `rollover: ${version - 1} swaps, ${tally.ok} requests OK, versions answered ${[...tally.versions].join(',')}, failures ${tally.failures.length}`,
    );
    assert.deepEqual(tally.failures, []);
    assert.ok(tally.versions.size >= 2, `answers came from versions ${[...tally.versions].join(',')}`);
    assert.ok(tally.versions.has(version), 'the newest version ends up serving');
  });

  it('reloads that move the base path back and forth: no failed request on any path', async () => {
    // A second copy of the model under another base path.
    const current = h.server.service.status({ name: 'mobilenet' }).find((s) => s.state === 'AVAILABLE')!;
    const paths = [join(root, 'mobilenet'), join(root, 'elsewhere')];
    await cp(join(paths[0]!, String(current.version)), join(paths[1]!, '1'), { recursive: true });
    await cp(join(paths[0]!, 'visionserve.json'), join(paths[1]!, 'visionserve.json'));
    await cp(join(paths[0]!, 'imagenet_synset.txt'), join(paths[1]!, 'imagenet_synset.txt'));

    const tally: Tally = { ok: 0, failures: [], versions: new Set() };
    const stop = { done: false };
    const clients = startClients(stop, tally);
    let reloads = 0;
    while (reloads < RELOADS) {
      await grpc.reloadConfig([{ name: 'mobilenet', basePath: paths[(reloads + 1) % 2]! }]);
      reloads++;
      await new Promise((r) => setTimeout(r, 300));
    }
    stop.done = true;
    await Promise.all(clients);
    console.log(`base path reloads: ${reloads}, ${tally.ok} requests OK, failures ${tally.failures.length}`);
    assert.deepEqual(tally.failures, []);
    assert.ok(tally.ok > reloads, 'requests ran throughout');
  });
});
