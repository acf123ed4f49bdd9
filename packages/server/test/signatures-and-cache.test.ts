import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import { createInferenceService } from '../src/core/create-inference-service.js';
import { createModelManager } from '../src/core/model-manager.js';
import { createResponseCache, responseCacheKey } from '../src/core/response-cache.js';
import type { RunOptions, Session } from '../src/core/session.js';
import type { Signature } from '../src/core/signature.js';
import type { ServableAssets } from '../src/contracts/servable-assets.js';
import { extendSignatures } from '../src/frontends/shared/image-bytes-signature.js';
import { createMemoryLogger } from './fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { modelManagerSettings } from '../src/compose/config-settings.js';

const f32 = (values: number[]): Tensor => ({
  dtype: 'float32',
  shape: [values.length],
  data: Float32Array.from(values),
});
const str = (...values: string[]): Tensor => ({
  dtype: 'string',
  shape: [values.length],
  data: values.map((v) => new TextEncoder().encode(v)),
});

const PLAIN: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1] } },
  outputs: { y: { name: 'y', dtype: 'float32', shape: [-1] } },
  methodName: 'tensorflow/serving/predict',
};
const PARSED: Signature = {
  inputs: { inputs: { name: 'inputs', dtype: 'string', shape: [-1] } },
  outputs: { outputs: { name: 'y', dtype: 'float32', shape: [-1] } },
  methodName: 'tensorflow/serving/regress',
  adapter: { kind: 'tf-example', inputKey: 'inputs', features: [{ key: 'x', dtype: 'float32', shape: [] }] },
  modelInputs: { x: { name: 'x', dtype: 'float32', shape: [-1] } },
};

/** A session with two signatures; y = x + offset, where offset is 1 for "other". Records run options. */
function multiSession(runs: (RunOptions | undefined)[]): Session {
  return {
    signature: PLAIN,
    signatures: { serving_default: PLAIN, other: PLAIN, regress: PARSED },
    run(inputs, options) {
      runs.push(options);
      const x = inputs['x']!.data as Float32Array;
      const offset = options?.signatureName === 'other' ? 1 : 0;
      return Promise.resolve({ y: { dtype: 'float32', shape: [x.length], data: x.map((v) => v + offset) } });
    },
    close: () => Promise.resolve(),
  };
}

function assets(responseCache = false): ServableAssets {
  return { vision: { config: { responseCache }, labels: undefined }, handlerModulePath: undefined };
}

async function setup(options: { cache?: boolean } = {}) {
  const runs: (RunOptions | undefined)[] = [];
  const logger = createMemoryLogger();
  const manager = createModelManager<ServableAssets>({
    ...modelManagerSettings(DEFAULTS),
    sessionFactory: { load: () => Promise.resolve(multiSession(runs)) },
    loadAssets: () => Promise.resolve(assets(options.cache ?? false)),
    listVersions: () => Promise.resolve([1]),
    logger,
  });
  const cache = createResponseCache({ maxBytes: 4096 });
  const adapted: Signature[] = [];
  const service = createInferenceService<ServableAssets>({
    manager,
    logger,
    extendSignatures: (sigs) => ({
      signatures: { ...sigs, renamed: { ...PLAIN, runs: 'other' } },
      problems: ['a problem to log once'],
    }),
    adaptInputs: (signature, inputs) => {
      adapted.push(signature);
      const text = new TextDecoder().decode((inputs['inputs']!.data as Uint8Array[])[0]);
      return Promise.resolve({ x: f32([Number(text)]) });
    },
    responseCache: { cache, enabledFor: (a) => a.vision.config?.responseCache === true },
  });
  await service.reloadConfig([
    { name: 'm', basePath: '/m', versionPolicy: { kind: 'latest', numVersions: 1 }, versionLabels: {} },
  ]);
  return { service, manager, runs, adapted, cache, logger };
}

const y = (outputs: Record<string, Tensor>): number[] =>
  Array.from((outputs['y'] ?? outputs['outputs'])!.data as Float32Array);

void describe('signatures of a servable', () => {
  void it("serves the session's signatures plus derived ones; runs the one a signature names", async () => {
    const { service, runs, logger, manager } = await setup();
    const names = await service.withServable({ name: 'm' }, (s) =>
      Promise.resolve(Object.keys(s.signatures).sort()),
    );
    assert.deepEqual(names, ['other', 'regress', 'renamed', 'serving_default']);
    const out = await service.withServable({ name: 'm' }, (s) =>
      s.predict({ inputs: { x: f32([1, 2]) }, signatureName: 'renamed' }),
    );
    assert.deepEqual(y(out), [2, 3]);
    assert.equal(runs.at(-1)?.signatureName, 'other');
    await service.predict({ model: { name: 'm' }, inputs: { x: f32([1]) } });
    assert.equal(runs.at(-1)?.signatureName, 'serving_default');
    await service.predict({ model: { name: 'm' }, inputs: { x: f32([1]) } });
    assert.equal(logger.records.filter((r) => r.message === 'signature not offered').length, 1);
    await assert.rejects(
      service.predict({ model: { name: 'm', signatureName: 'nope' }, inputs: { x: f32([1]) } }),
      (e: unknown) => e instanceof ServingError && e.code === Code.FAILED_PRECONDITION,
    );
    await manager.close();
  });

  void it('adapts client inputs of an adapted signature, validating both sides; modelInputs skips the adapter', async () => {
    const { service, adapted, manager } = await setup();
    const out = await service.predict({
      model: { name: 'm', signatureName: 'regress' },
      inputs: { inputs: str('4') },
    });
    assert.deepEqual(y(out.outputs), [4]);
    assert.equal(adapted.length, 1);
    await assert.rejects(
      service.predict({ model: { name: 'm', signatureName: 'regress' }, inputs: { x: f32([1]) } }),
      /input tensor alias not found in signature: x/,
    );
    const direct = await service.withServable({ name: 'm' }, (s) =>
      s.predict({ inputs: { x: f32([5]) }, signatureName: 'regress', modelInputs: true }),
    );
    assert.deepEqual(y(direct), [5]);
    assert.equal(adapted.length, 1);
    await assert.rejects(
      service.withServable({ name: 'm' }, (s) =>
        s.predict({ inputs: { inputs: str('1') }, signatureName: 'regress', modelInputs: true }),
      ),
      /input tensor alias not found in signature: inputs/,
    );
    await manager.close();
  });

  void it('answers repeated predicts of opted-in versions from the response cache, as copies', async () => {
    const { service, runs, cache, manager } = await setup({ cache: true });
    const first = await service.predict({ model: { name: 'm' }, inputs: { x: f32([1, 2]) } });
    const second = await service.predict({ model: { name: 'm' }, inputs: { x: f32([1, 2]) } });
    assert.equal(runs.length, 1);
    assert.deepEqual(y(second.outputs), y(first.outputs));
    (second.outputs['y']!.data as Float32Array)[0] = 99;
    const third = await service.predict({ model: { name: 'm' }, inputs: { x: f32([1, 2]) } });
    assert.deepEqual(y(third.outputs), [1, 2]);
    await service.predict({ model: { name: 'm', signatureName: 'other' }, inputs: { x: f32([1, 2]) } });
    assert.equal(runs.length, 2, 'another signature is another entry');
    assert.deepEqual({ hits: cache.stats().hits, misses: cache.stats().misses }, { hits: 2, misses: 2 });
    cache.invalidate('m', 1);
    assert.equal(cache.stats().entries, 0);
    await manager.close();
  });
});

void describe('response cache', () => {
  const t = (n: number): Record<string, Tensor> => ({ y: f32(Array.from({ length: n }, (_, i) => i)) });

  void it('evicts least recently used entries to stay within its byte bound', () => {
    const cache = createResponseCache({ maxBytes: 2000, maxEntryBytes: 2000 });
    cache.insert('a', 'm', 1, t(100)); // 656 bytes with the overhead
    cache.insert('b', 'm', 1, t(100));
    assert.ok(cache.lookup('a', 'm')); // a is now the most recently used
    cache.insert('c', 'm', 1, t(100));
    assert.equal(cache.stats().entries, 3);
    cache.insert('d', 'm', 1, t(100));
    assert.equal(cache.lookup('b', 'm'), undefined, 'b was least recently used');
    assert.ok(cache.lookup('a', 'm'));
    assert.ok(cache.stats().bytes <= 2000);
    assert.equal(cache.stats().evictions, 1);
    cache.insert('huge', 'm', 1, t(1000));
    assert.equal(cache.stats().uncacheable, 1);
    assert.equal(cache.modelStats().get('m')?.evictions, 1);
    cache.invalidate('m');
    assert.deepEqual([cache.stats().entries, cache.stats().bytes], [0, 0]);
  });

  void it('keys on model, version, signature, output filter and every input byte', () => {
    const key = (over: Partial<{ model: string; version: number; sig: string; out: string[]; x: Tensor }>) =>
      responseCacheKey(over.model ?? 'm', over.version ?? 1, over.sig ?? 's', over.out ?? ['y'], {
        x: over.x ?? f32([1, 2]),
      });
    const base = key({});
    assert.equal(key({}), base);
    for (const other of [
      key({ model: 'n' }),
      key({ version: 2 }),
      key({ sig: 't' }),
      key({ out: ['y', 'z'] }),
      key({ x: f32([1, 3]) }),
      key({ x: { dtype: 'float32', shape: [2, 1], data: Float32Array.of(1, 2) } }),
      key({ x: str('ab') }),
    ]) {
      assert.notEqual(other, base);
    }
    assert.notEqual(
      responseCacheKey('m', 1, 's', [], { x: str('a', 'bc') }),
      responseCacheKey('m', 1, 's', [], { x: str('ab', 'c') }),
    );
  });
});

void describe('the encoded-image signature from visionserve.json', () => {
  const IMAGE: Signature = {
    inputs: { images: { name: 'images', dtype: 'float32', shape: [-1, 4, 4, 3] } },
    outputs: { p: { name: 'p', dtype: 'float32', shape: [-1, 2] } },
    methodName: 'tensorflow/serving/predict',
  };
  const withConfig = (config: object): ServableAssets => ({
    vision: { config: config, labels: undefined },
    handlerModulePath: undefined,
  });

  void it('adds serving_bytes by default, and can take over serving_default', () => {
    const image = { width: 4, height: 4 };
    const plain = extendSignatures({ serving_default: IMAGE }, withConfig({ image }));
    assert.deepEqual(Object.keys(plain.signatures).sort(), ['serving_bytes', 'serving_default']);
    const bytes = plain.signatures['serving_bytes']!;
    assert.deepEqual(bytes.inputs, { image_bytes: { name: 'image_bytes', dtype: 'string', shape: [-1] } });
    assert.equal(bytes.runs, 'serving_default');
    assert.deepEqual(bytes.adapter, { kind: 'encoded-image', inputKey: 'image_bytes', imageInput: 'images' });
    const swapped = extendSignatures(
      { serving_default: IMAGE },
      withConfig({ image, imageBytesSignature: { name: 'jpeg', input: 'b', default: true } }),
    );
    assert.deepEqual(Object.keys(swapped.signatures).sort(), ['jpeg', 'serving_default', 'serving_tensor']);
    assert.equal(swapped.signatures['serving_default']!.adapter?.kind, 'encoded-image');
    assert.equal(swapped.signatures['serving_tensor']!.runs, 'serving_default');
    assert.deepEqual(
      extendSignatures({ serving_default: IMAGE }, withConfig({ image, imageBytesSignature: false }))
        .signatures,
      {
        serving_default: IMAGE,
      },
    );
  });

  void it('reports settings that do not fit the model instead of offering a broken signature', () => {
    const cases: [Record<string, Signature>, object, RegExp][] = [
      [{ serving_default: PLAIN }, { image: {} }, /images need rank 4/],
      [{ serving_default: IMAGE }, { image: { dtype: 'uint8' } }, /image.dtype is uint8/],
      [
        { serving_default: IMAGE },
        { image: {}, imageBytesSignature: { base: 'nope' } },
        /base signature "nope" does not exist/,
      ],
      [
        { serving_default: IMAGE, serving_bytes: PLAIN },
        { image: {} },
        /already has a signature of that name/,
      ],
    ];
    for (const [sigs, config, problem] of cases) {
      const out = extendSignatures(sigs, withConfig(config));
      assert.equal(out.signatures, sigs);
      assert.match(out.problems[0]!, problem);
    }
  });
});
