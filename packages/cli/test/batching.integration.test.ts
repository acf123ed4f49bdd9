/**
 * Dynamic batching end to end: a real server with batching on and a reference
 * server with batching off, real sockets, both protocols. Random concurrent
 * mixes of requests of 1..k rows must each get exactly the reference answer for
 * their own rows.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Tensor } from '@visionserve/protocol';
import { AFFINE_B, AFFINE_W, affineModel } from '../src/tools/batching-models.js';
import type { WarmupReport } from '@visionserve/server';
import { encodeWarmupFile } from '@visionserve/server';
import { sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { grpcPredict, nest, postJson, startHarness, type Harness } from './helpers/server-harness.js';
import { mulberry32 } from '../src/bench/overload-loop.js';

function randomTensor(rand: () => number, shape: number[], scale: number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = (rand() * 2 - 1) * scale;
  return { dtype: 'float32', shape, data };
}

const flat = (value: unknown): number[] => (Array.isArray(value) ? value.flatMap(flat) : [value as number]);

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    assert.ok(Math.abs(a - e) <= 1e-5 * Math.max(1, Math.abs(e)), `${what}[${i}]: ${a} vs ${e}`);
  }
}

interface Call {
  readonly model: 'affine' | 'mobilenet';
  readonly protocol: 'rest' | 'grpc';
  readonly input: Tensor;
  readonly outputFilter?: string[];
}

/** Output name -> {shape, values}, through the given protocol. */
async function call(h: Harness, c: Call): Promise<Record<string, { shape: number[]; values: number[] }>> {
  const inputName = c.model === 'affine' ? 'x' : 'input';
  // Copy: the server takes ownership of what it decodes, the test keeps its input.
  const input: Tensor = { ...c.input, data: (c.input.data as Float32Array).slice() };
  if (c.protocol === 'grpc') {
    const { outputs } = await grpcPredict(
      h.grpc,
      c.model,
      { [inputName]: input },
      {
        ...(c.outputFilter ? { outputFilter: c.outputFilter } : {}),
      },
    );
    return Object.fromEntries(
      Object.entries(outputs).map(([k, t]) => [
        k,
        { shape: [...t.shape], values: [...(t.data as Float32Array)] },
      ]),
    );
  }
  if (c.model === 'affine') {
    const { status, json } = await postJson(`${h.rest}/v1/models/affine:predict`, {
      inputs: { x: nest(input.data as Float32Array, input.shape) },
    });
    assert.equal(status, 200, JSON.stringify(json));
    const outputs = (json as { outputs: { y: number[][]; norm: number[] } }).outputs;
    return {
      y: { shape: [outputs.y.length, 3], values: flat(outputs.y) },
      norm: { shape: [outputs.norm.length], values: outputs.norm },
    };
  }
  const { status, json } = await postJson(`${h.rest}/v1/models/mobilenet:predict`, {
    instances: nest(input.data as Float32Array, input.shape),
  });
  assert.equal(status, 200, JSON.stringify(json).slice(0, 300));
  const predictions = (json as { predictions: number[][] }).predictions;
  return { output: { shape: [predictions.length, 1000], values: flat(predictions) } };
}

void describe('dynamic batching on real models (REST + gRPC)', () => {
  let batched: Harness;
  let reference: Harness;
  const warmups: WarmupReport[] = [];

  before(async () => {
    const root = await tempRepo('vs-batching-');
    await placeModel(root, 'affine', 1, affineModel());
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    const warmupDir = join(root, 'affine', '1', 'assets.extra');
    await mkdir(warmupDir, { recursive: true });
    await writeFile(
      join(warmupDir, 'tf_serving_warmup_requests'),
      encodeWarmupFile([
        { inputs: { x: { dtype: 'float32', shape: [1, 4], data: new Float32Array(4) } } },
        {
          inputs: { x: { dtype: 'float32', shape: [3, 4], data: new Float32Array(12) } },
          outputFilter: ['y'],
        },
      ]),
    );
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'affine' base_path: 'affine' }
        config { name: 'mobilenet' base_path: 'mobilenet' }
      }`,
    );
    const params = join(root, 'batching.pbtxt');
    await writeFile(
      params,
      `max_batch_size { value: 8 }
       batch_timeout_micros { value: 2000 }
       max_enqueued_batches { value: 1000 }
       num_batch_threads { value: 2 }
       allowed_batch_sizes: 2
       allowed_batch_sizes: 4
       allowed_batch_sizes: 8`,
    );
    const common = { modelConfigFile: config, fileSystemPollSeconds: 0, intraOpThreads: 1 };
    batched = await startHarness(
      { ...common, instances: 2, enableBatching: true, batchingParametersFile: params },
      { onWarmup: (r) => warmups.push(r) },
    );
    reference = await startHarness({ ...common, instances: 1, enableModelWarmup: false });
  });
  after(async () => {
    await batched.close();
    await reference.close();
  });

  it('warmed every version up before it became AVAILABLE (file for affine, built-in for mobilenet)', () => {
    const byModel = Object.fromEntries(warmups.map((r) => [r.modelName, r]));
    assert.deepEqual([byModel['affine']?.kind, byModel['affine']?.runs], ['file', 2]);
    assert.deepEqual([byModel['mobilenet']?.kind, byModel['mobilenet']?.runs], ['built-in', 2]);
    for (const model of ['affine', 'mobilenet']) {
      assert.equal(batched.server.manager.status(model)[0]!.state, 'AVAILABLE');
    }
  });

  it('random concurrent mixes of 1..5 rows over both protocols get exactly their unbatched answers', async () => {
    const rand = mulberry32(20240604);
    const calls: Call[] = [];
    for (let i = 0; i < 60; i++) {
      const rows = 1 + Math.floor(rand() * 5);
      const protocol = rand() < 0.5 ? 'rest' : 'grpc';
      const filter = protocol === 'grpc' && rand() < 0.3 ? { outputFilter: ['y'] } : {};
      calls.push({ model: 'affine', protocol, input: randomTensor(rand, [rows, 4], 10), ...filter });
    }
    for (let i = 0; i < 14; i++) {
      const rows = 1 + Math.floor(rand() * 3);
      calls.push({
        model: 'mobilenet',
        protocol: i % 2 === 0 ? 'grpc' : 'rest',
        input: randomTensor(rand, [rows, 3, 224, 224], 2),
      });
    }
    const before = batched.server.batching!.snapshot();
    const statsBefore = batched.server.statistics.snapshot('affine', 1);
    const answers = await Promise.all(calls.map((c) => call(batched, c)));
    const after = batched.server.batching!.snapshot();
    const statsAfter = batched.server.statistics.snapshot('affine', 1);

    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      const ref = await call(reference, { ...c, protocol: 'grpc' });
      const got = answers[i]!;
      assert.deepEqual(Object.keys(got).sort(), Object.keys(ref).sort(), `call ${i} outputs`);
      for (const [name, r] of Object.entries(ref)) {
        assert.deepEqual(got[name]!.shape, r.shape, `call ${i} (${c.model}, ${c.protocol}) ${name} shape`);
        assertClose(got[name]!.values, r.values, `call ${i} (${c.model}, ${c.protocol}) ${name}`);
      }
    }

    // Batching did happen, and only with allowed sizes.
    const delta = (model: string) => {
      const a = after.find((s) => s.model === model)!;
      const b = before.find((s) => s.model === model)!;
      return { batches: a.batches - b.batches, tasks: a.tasks - b.tasks, sizes: Object.keys(a.batchSizes) };
    };
    const affine = delta('affine');
    assert.equal(affine.tasks, 60);
    assert.ok(
      affine.batches < affine.tasks,
      `affine: ${affine.batches} batches for ${affine.tasks} requests`,
    );
    for (const size of [...affine.sizes, ...delta('mobilenet').sizes])
      assert.ok(['2', '4', '8'].includes(size));
    assert.equal(delta('mobilenet').tasks, 14);

    // Statistics (TF Serving traffic counts too): one success per request, one execution per
    // merged run, batch_stats keyed by the padded sizes that ran.
    assert.equal(statsAfter.success.count - statsBefore.success.count, 60);
    assert.equal(statsAfter.queue.count - statsBefore.queue.count, 60);
    // affine's rank-1 output `norm` makes it a max_batch_size 0 model in KServe terms: a request
    // is one inference there, whatever its rows.
    assert.equal(statsAfter.inferenceCount - statsBefore.inferenceCount, 60);
    assert.equal(statsAfter.executionCount - statsBefore.executionCount, affine.batches);
    for (const b of statsAfter.batches)
      assert.ok([2, 4, 8].includes(b.batchSize), `batch size ${b.batchSize}`);
  });

  it('affine reference answers are the math (sanity check of the reference server)', async () => {
    const x = Float32Array.from([1, 2, 3, 4]);
    const ref = await call(reference, {
      model: 'affine',
      protocol: 'grpc',
      input: { dtype: 'float32', shape: [1, 4], data: x },
    });
    assert.deepEqual(ref['norm']!.values, [30]);
    const expected = [0, 1, 2].map(
      (j) => AFFINE_B[j]! + [0, 1, 2, 3].reduce((s, k) => s + x[k]! * AFFINE_W[k * 3 + j]!, 0),
    );
    assertClose(ref['y']!.values, expected, 'y');
  });

  it('refuses a request larger than max_batch_size with 400 / INVALID_ARGUMENT', async () => {
    const { status, json } = await postJson(`${batched.rest}/v1/models/affine:predict`, {
      inputs: { x: Array.from({ length: 9 }, () => [1, 2, 3, 4]) },
    });
    assert.equal(status, 400);
    assert.match((json as { error: string }).error, /Task size 9 is larger than maximum input batch size 8/);
  });
});

void describe('per-model batching parameters and warmup files on a real server', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo('vs-batching-per-model-');
    await placeModel(root, 'small', 1, affineModel());
    await writeFile(join(root, 'small', '1', 'batching_params.pbtxt'), 'max_batch_size { value: 2 }\n');
    await placeModel(root, 'corrupt', 1, affineModel());
    const file = encodeWarmupFile([
      { inputs: { x: { dtype: 'float32', shape: [1, 4], data: new Float32Array(4) } } },
    ]);
    file[file.length - 1] = file[file.length - 1]! ^ 0xff;
    await mkdir(join(root, 'corrupt', '1', 'assets.extra'), { recursive: true });
    await writeFile(join(root, 'corrupt', '1', 'assets.extra', 'tf_serving_warmup_requests'), file);
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'small' base_path: 'small' }
        config { name: 'corrupt' base_path: 'corrupt' }
      }`,
    );
    h = await startHarness({
      modelConfigFile: config,
      // The corrupt model never loads; without this the server would refuse to start (as TF Serving).
      waitForModels: true,
      fileSystemPollSeconds: 0,
      instances: 1,
      enableBatching: true,
      enablePerModelBatchingParameters: true,
    });
  });
  after(async () => {
    await h.close();
  });

  it('applies batching_params.pbtxt of the version directory', async () => {
    const ok = await postJson(`${h.rest}/v1/models/small:predict`, { inputs: { x: [[1, 2, 3, 4]] } });
    assert.equal(ok.status, 200);
    const { status, json } = await postJson(`${h.rest}/v1/models/small:predict`, {
      inputs: {
        x: [
          [1, 2, 3, 4],
          [1, 2, 3, 4],
          [1, 2, 3, 4],
        ],
      },
    });
    assert.equal(status, 400);
    assert.match((json as { error: string }).error, /Task size 3 is larger than maximum input batch size 2/);
  });

  it('a corrupt warmup file fails the load with DATA_LOSS in the model status', async () => {
    const res = await fetch(`${h.rest}/v1/models/corrupt`);
    const body = (await res.json()) as {
      model_version_status: { state: string; status: { error_code: string; error_message: string } }[];
    };
    const status = body.model_version_status[0]!;
    assert.equal(status.state, 'END');
    assert.equal(status.status.error_code, 'DATA_LOSS');
    assert.match(status.status.error_message, /Failed to read warmup file: .*data crc32c mismatch/);
  });
});
