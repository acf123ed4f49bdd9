import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { rm, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { halfPlusModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { grpcPredict, postJson, startHarness, type Harness } from './helpers/server-harness.js';

interface StatusJson {
  model_version_status: {
    version: string;
    state: string;
    status: { error_code: string; error_message: string };
  }[];
}

async function status(h: Harness, model: string): Promise<StatusJson['model_version_status']> {
  const res = await fetch(`${h.rest}/v1/models/${model}`);
  if (res.status !== 200) return [];
  return ((await res.json()) as StatusJson).model_version_status;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** y for x = 2 tells which version answered: 0.5 * 2 + offset. */
async function answerRest(h: Harness, path: string): Promise<number> {
  const { status: code, json } = await postJson(`${h.rest}/v1/models/${path}:predict`, { instances: [2] });
  if (code !== 200) throw new Error(`HTTP ${code}: ${JSON.stringify(json)}`);
  return (json as { predictions: number[] }).predictions[0]!;
}

async function answerGrpc(
  h: Harness,
  model: string,
  opts: { label?: string; version?: number } = {},
): Promise<number> {
  const { outputs } = await grpcPredict(
    h.grpc,
    model,
    { x: { dtype: 'float32', shape: [1], data: new Float32Array([2]) } },
    opts,
  );
  return (outputs['y']!.data as Float32Array)[0]!;
}

describe('model version lifecycle on the real server', () => {
  const harnesses: Harness[] = [];
  after(async () => {
    await Promise.all(harnesses.map((h) => h.close()));
  });

  it('adds version 2 while requests flow (none fails), then removes it, and survives a corrupt version', async () => {
    const root = await tempRepo();
    const base = await placeModel(root, 'hp', 1, halfPlusModel(1)); // v1 answers 2, v2 answers 3
    const h = await startHarness({ modelName: 'hp', modelBasePath: base, fileSystemPollSeconds: 1 });
    harnesses.push(h);
    assert.equal(await answerRest(h, 'hp'), 2);

    let stop = false;
    const seen = new Set<number>();
    const failures: unknown[] = [];
    const traffic = Array.from({ length: 3 }, async (_, i) => {
      while (!stop) {
        try {
          seen.add(i % 2 === 0 ? await answerRest(h, 'hp') : await answerGrpc(h, 'hp'));
        } catch (error) {
          failures.push(error);
        }
      }
    });

    await placeModel(root, 'hp', 2, halfPlusModel(2));
    await until('version 2 AVAILABLE and version 1 unloaded', async () => {
      const s = await status(h, 'hp');
      return (
        s.some((v) => v.version === '2' && v.state === 'AVAILABLE') &&
        !s.some((v) => v.version === '1' && v.state === 'AVAILABLE')
      );
    });
    await until('latest answers from version 2', async () => (await answerRest(h, 'hp')) === 3);

    await rm(join(base, '2'), { recursive: true });
    await until('version 1 serving again', async () => (await answerRest(h, 'hp')) === 2);

    // A corrupt newer version: its status carries the error, the server keeps serving version 1.
    await mkdir(join(base, '3'), { recursive: true });
    await writeFile(join(base, '3', 'model.onnx'), 'not a model at all');
    await until('version 3 failed', async () =>
      (await status(h, 'hp')).some((v) => v.version === '3' && v.state === 'END'),
    );
    const v3 = (await status(h, 'hp')).find((v) => v.version === '3')!;
    assert.notEqual(v3.status.error_code, 'OK');
    assert.ok(v3.status.error_message.length > 0);
    assert.ok(!v3.status.error_message.includes(root), 'no host paths in status');
    assert.equal(await answerRest(h, 'hp'), 2);

    stop = true;
    await Promise.all(traffic);
    assert.deepEqual(failures, [], 'no request failed during the version changes');
    assert.ok(seen.has(2) && seen.has(3), `both versions answered: ${[...seen].join(',')}`);
  });

  it('routes by version label and reloads the config file', async () => {
    const root = await tempRepo();
    await placeModel(root, 'hp', 1, halfPlusModel(1));
    await placeModel(root, 'hp', 2, halfPlusModel(2));
    const config = join(root, 'models.config');
    const write = (extra: string): Promise<void> =>
      writeFile(
        config,
        `model_config_list {
          config {
            name: 'hp' base_path: 'hp'
            model_version_policy { specific { versions: 1 versions: 2 } }
            version_labels { key: 'stable' value: 1 }
            version_labels { key: 'canary' value: 2 }
          }
          ${extra}
        }`,
      );
    await write('');
    const h = await startHarness({
      modelConfigFile: config,
      modelConfigFilePollSeconds: 1,
      fileSystemPollSeconds: 1,
    });
    harnesses.push(h);

    assert.equal(await answerRest(h, 'hp/labels/stable'), 2);
    assert.equal(await answerRest(h, 'hp/labels/canary'), 3);
    assert.equal(await answerRest(h, 'hp/versions/1'), 2);
    assert.equal(await answerGrpc(h, 'hp', { label: 'canary' }), 3);
    assert.equal(await answerGrpc(h, 'hp', { version: 1 }), 2);
    assert.equal(await answerRest(h, 'hp'), 3, 'latest is version 2');
    const unknown = await postJson(`${h.rest}/v1/models/hp/labels/beta:predict`, { instances: [2] });
    assert.equal(unknown.status, 400);
    assert.deepEqual(unknown.json, { error: 'Unrecognized servable version label: beta' });

    // Config reload: a second model appears without a restart.
    await placeModel(root, 'other', 7, halfPlusModel(10));
    await write(`config { name: 'other' base_path: 'other' }`);
    await until('model "other" AVAILABLE', async () =>
      (await status(h, 'other')).some((v) => v.state === 'AVAILABLE'),
    );
    assert.equal(await answerRest(h, 'other'), 11);
    assert.equal(await answerRest(h, 'hp/labels/stable'), 2, 'existing model untouched');
  });
});
