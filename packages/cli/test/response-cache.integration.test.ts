/**
 * The response cache on a real server: opt-in per model, hit/miss/eviction counters, a new
 * version invalidates, the byte bound holds under a flood of distinct inputs, and what a
 * cached request costs against one that runs (MobileNetV2, JPEG through the encoded-image
 * signature).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import { halfPlusModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { placeMobilenet, request } from './helpers/sagemaker-models.js';
import { image } from './helpers/shared.js';
import { type Harness, postJson, startHarness } from './helpers/server-harness.js';

const CACHE_BYTES = 64 * 1024;

function p50(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

describe('response cache', () => {
  let h: Harness;
  let root: string;

  before(async () => {
    root = await tempRepo('vs-cache-');
    const cached = await placeModel(root, 'cached', 1, halfPlusModel(2));
    await writeFile(join(cached, 'visionserve.json'), JSON.stringify({ responseCache: true }));
    await placeModel(root, 'uncached', 1, halfPlusModel(2));
    const mobilenet = await placeMobilenet(root);
    await writeFile(
      join(mobilenet, 'visionserve.json'),
      JSON.stringify({ ...MOBILENET_V2_VISION_CONFIG, responseCache: true }),
    );
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'cached' base_path: 'cached' }
        config { name: 'uncached' base_path: 'uncached' }
        config { name: 'mobilenet' base_path: 'mobilenet' }
      }`,
    );
    const monitoring = join(root, 'monitoring.config');
    await writeFile(
      monitoring,
      'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n',
    );
    h = await startHarness({
      modelConfigFile: config,
      fileSystemPollSeconds: 0,
      responseCacheBytes: CACHE_BYTES,
      monitoringConfigFile: monitoring,
    });
  });
  after(async () => {
    await h.close();
  });

  const stats = () => h.server.responseCache!.stats();

  /** One sample of the Prometheus exposition on the REST port (undefined when absent). */
  async function metric(name: string, labels = ''): Promise<number | undefined> {
    const text = (await request(`${h.rest}/monitoring/prometheus/metrics`)).text;
    const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  }

  it('answers a repeated request from the cache (hit counter moves), per model and only when opted in', async () => {
    const before_ = stats();
    const first = await postJson(`${h.rest}/v1/models/cached:predict`, { instances: [1, 2, 3] });
    const second = await postJson(`${h.rest}/v1/models/cached:predict`, { instances: [1, 2, 3] });
    assert.deepEqual(first.json, { predictions: [2.5, 3, 3.5] });
    assert.deepEqual(second.json, first.json);
    assert.equal(stats().misses, before_.misses + 1);
    assert.equal(stats().hits, before_.hits + 1);
    // Another output filter, signature or input is another entry.
    await postJson(`${h.rest}/v1/models/cached:predict`, { instances: [1, 2, 4] });
    assert.equal(stats().hits, before_.hits + 1);
    await postJson(`${h.rest}/v1/models/uncached:predict`, { instances: [1, 2, 3] });
    await postJson(`${h.rest}/v1/models/uncached:predict`, { instances: [1, 2, 3] });
    assert.equal(stats().hits, before_.hits + 1);
    assert.equal(stats().misses, before_.misses + 2);
    assert.equal(h.server.responseCache!.modelStats().get('cached')?.hits, 1);
    assert.equal(h.server.responseCache!.modelStats().get('uncached'), undefined);
    // The same counters on /metrics.
    assert.equal(await metric('visionserve_response_cache_hits_total', '{model="cached"}'), 1);
    assert.equal(await metric('visionserve_response_cache_misses_total', '{model="cached"}'), 2);
    assert.equal(await metric('visionserve_response_cache_hits_total', '{model="uncached"}'), undefined);
    assert.equal(await metric('visionserve_response_cache_max_bytes'), CACHE_BYTES);
    assert.equal(await metric('visionserve_response_cache_entries'), stats().entries);
  });

  it('holds the byte bound under a flood of distinct inputs (evicting least recently used)', async () => {
    const before_ = stats();
    for (let i = 0; i < 300; i++) {
      const x = Array.from({ length: 256 }, (_, k) => i * 1000 + k);
      const res = await postJson(`${h.rest}/v1/models/cached:predict`, { instances: x });
      assert.equal(res.status, 200);
      assert.ok(stats().bytes <= CACHE_BYTES, `cache holds ${stats().bytes} bytes`);
    }
    const after_ = stats();
    assert.ok(after_.evictions - before_.evictions > 200, `evictions ${after_.evictions}`);
    assert.ok(after_.entries > 10 && after_.bytes > CACHE_BYTES / 2, `entries ${after_.entries}`);
    const exported = await metric('visionserve_response_cache_evictions_total', '{model="cached"}');
    assert.equal(exported, after_.evictions);
    assert.ok((await metric('visionserve_response_cache_bytes'))! <= CACHE_BYTES);
  });

  it('a new version is never answered from the old one; its entries are dropped when it unloads', async () => {
    await postJson(`${h.rest}/v1/models/cached:predict`, { instances: [10] });
    assert.deepEqual((await postJson(`${h.rest}/v1/models/cached:predict`, { instances: [10] })).json, {
      predictions: [7],
    });
    const invalidated = stats().invalidations;
    await placeModel(root, 'cached', 2, halfPlusModel(3));
    await h.server.manager.poll();
    for (
      let i = 0;
      i < 100 && h.server.service.status({ name: 'cached', version: 1 })[0]!.state !== 'END';
      i++
    ) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual((await postJson(`${h.rest}/v1/models/cached:predict`, { instances: [10] })).json, {
      predictions: [8],
    });
    assert.ok(stats().invalidations > invalidated, 'version 1 entries dropped');
  });

  it('a cached request costs a fraction of one that runs (MobileNetV2, JPEG via the encoded-image signature)', async (t) => {
    const same = JSON.stringify({
      signature_name: 'serving_bytes',
      instances: [{ b64: image('cat_tabby.jpg').toString('base64') }],
    });
    // Distinct requests that still decode to the same photo: bytes after the JPEG's end marker are ignored.
    const variant = (i: number): string =>
      JSON.stringify({
        signature_name: 'serving_bytes',
        instances: [
          { b64: Buffer.concat([image('cat_tabby.jpg'), Buffer.from(`vs${i}`)]).toString('base64') },
        ],
      });
    const time = async (text: string): Promise<number> => {
      const t0 = performance.now();
      const res = await request(`${h.rest}/v1/models/mobilenet:predict`, {
        body: text,
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(res.status, 200, res.text);
      return performance.now() - t0;
    };
    await time(same); // the first run also warms up
    const runs: number[] = [];
    for (let i = 0; i < 15; i++) runs.push(await time(variant(i)));
    const hits: number[] = [];
    for (let i = 0; i < 15; i++) hits.push(await time(same));
    t.diagnostic(
      `MobileNetV2 REST b64 p50: runs ${p50(runs).toFixed(2)} ms, cache hits ${p50(hits).toFixed(2)} ms`,
    );
    assert.ok(p50(hits) < p50(runs), `hit ${p50(hits)} ms vs run ${p50(runs)} ms`);
  });
});
