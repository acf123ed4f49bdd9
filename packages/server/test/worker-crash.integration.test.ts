/**
 * A real server (in this process, real sockets, real onnxruntime): an inference worker
 * terminated while it is inside session.run fails only the request it was running; the
 * process, the other instance's request and the next requests live on. Before
 * native-call-guard.ts the terminate ended the process with SIGABRT (here: the test runner).
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { resolveServerConfig } from '../src/config/server-config.js';
import { inNativeCall } from '../src/runtime/native-call-guard.js';
import { startSpareInferenceWorkers } from '../src/runtime/spare-inference-workers.js';
import { type RunningVisionServer, startVisionServer } from '../src/server.js';
import { silentLogger } from '../src/util/logger.js';
import { sharedModel, stageModel } from './shared-models.js';

/** A KServe v2 binary infer of MobileNetV2 zeros, batch `n`; resolves with the status and JSON. */
async function infer(rest: string, n: number): Promise<{ status: number; json: Record<string, unknown> }> {
  const values = new Float32Array(n * 3 * 224 * 224);
  const header = Buffer.from(
    JSON.stringify({
      inputs: [
        {
          name: 'input',
          shape: [n, 3, 224, 224],
          datatype: 'FP32',
          parameters: { binary_data_size: values.byteLength },
        },
      ],
    }),
  );
  const res = await fetch(`${rest}/v2/models/mobilenet/infer`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/octet-stream',
      'Inference-Header-Content-Length': String(header.byteLength),
    },
    body: Buffer.concat([header, Buffer.from(values.buffer)]),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const outputShape = (json: Record<string, unknown>): unknown =>
  (json['outputs'] as { shape: number[] }[] | undefined)?.[0]?.shape;

describe('a worker terminated inside session.run, on a real server', () => {
  let server: RunningVisionServer;
  let rest: string;
  /** The inference workers of the model's two instances, in instance order. */
  const workers: Worker[] = [];

  before(async () => {
    const base = await stageModel('mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    const configFile = join(base, '..', 'models.config');
    await writeFile(configFile, `model_config_list { config { name: 'mobilenet' base_path: '${base}' } }`);
    // The loads take these spares: the test holds the very Worker objects the pool runs on.
    const spares = startSpareInferenceWorkers({ count: 2 });
    const held = {
      take: (): Worker | undefined => {
        const worker = spares.take();
        if (worker !== undefined) workers.push(worker);
        return worker;
      },
      get idle() {
        return spares.idle;
      },
      add: (count: number) => {
        spares.add(count);
      },
      close: () => spares.close(),
    };
    const config = resolveServerConfig({
      host: '127.0.0.1',
      grpcPort: 0,
      restPort: 0,
      sagemakerPort: -1,
      logLevel: 'silent',
      maxQueueWaitMs: 0,
      instances: 2,
      modelConfigFile: configFile,
      fileSystemPollSeconds: 0,
    });
    server = await startVisionServer(config, silentLogger, {}, { spareWorkers: held });
    rest = `http://127.0.0.1:${server.ports.rest!}`;
  });
  after(async () => {
    await server.close();
  });

  it('fails only its request; the other instance answers, the process lives, the next requests are answered', async () => {
    assert.equal(workers.length, 2, 'both instances run on the spares handed over');
    // Which request reaches which instance depends on which body is read first: the test stops
    // whichever worker enters session.run first, and then exactly one request must fail.
    const requests = [infer(rest, 32), infer(rest, 32)];
    const deadline = Date.now() + 60_000;
    while (!workers.some((w) => inNativeCall(w)) && Date.now() < deadline)
      await new Promise((r) => setImmediate(r));
    const victim = workers.find((w) => inNativeCall(w));
    assert.ok(victim !== undefined, 'an instance entered session.run');
    const terminated = victim.terminate();
    const results = await Promise.all(requests);
    const failed = results.filter((r) => r.status === 500);
    const answered = results.filter((r) => r.status === 200);
    assert.equal(failed.length, 1, JSON.stringify(results.map((r) => r.status)));
    assert.match(String(failed[0]!.json['error']), /stopped during its run/);
    assert.equal(answered.length, 1);
    assert.deepEqual(outputShape(answered[0]!.json), [32, 1000], "the other instance's request was answered");
    await terminated;
    assert.equal((await fetch(`${rest}/v2/health/live`)).status, 200);
    // The replacement loads beside the surviving instance; every next request is answered.
    for (let i = 0; i < 4; i++) {
      const next = await infer(rest, 1);
      assert.equal(next.status, 200, JSON.stringify(next.json));
      assert.deepEqual(outputShape(next.json), [1, 1000]);
    }
  });
});
