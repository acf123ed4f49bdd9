/**
 * The client's own HTTP/2 (the default gRPC transport of @visionserve/client) against the real
 * server: calls the server answers before their request is fully sent leave nothing held on
 * the server; calls past the server's SETTINGS_MAX_CONCURRENT_STREAMS wait for a stream
 * instead of failing; calls across connection-age GOAWAYs all succeed (a call the server never
 * processed is sent again on a new connection).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError } from '@visionserve/protocol';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { grpcPredict, startHarness, type Harness } from './helpers/server-harness.js';

const x = (values: number[]) => ({
  x: { dtype: 'float32' as const, shape: [values.length], data: Float32Array.from(values) },
});

describe('the client HTTP/2 against the real server', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo('vs-lean-client-');
    const base = await placeModel(root, 'half', 1, halfPlusTwoModel());
    h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      grpcChannelArguments: ['grpc.max_concurrent_streams=2', 'grpc.max_connection_age_ms=300'],
    });
  });
  after(() => h.close());

  it('4 MB calls to a missing model, answered at their headers, hold nothing on the server', async () => {
    // 150 × 4 MB is more than the 512 MiB in-flight budget: a stream left half-open would
    // keep its bytes reserved and the later calls would be refused (UNAVAILABLE).
    const big = x(Array.from({ length: 1024 * 1024 }, (_, i) => i));
    for (let i = 0; i < 150; i++) {
      await assert.rejects(
        grpcPredict(h.grpc, 'nosuch', big),
        (e: unknown) => e instanceof ServingError && e.code === Code.NOT_FOUND,
        `call ${i}`,
      );
    }
    const out = await grpcPredict(h.grpc, 'half', x([2]));
    assert.deepEqual(Array.from(out.outputs['y']?.data as Float32Array), [3]);
  });

  it('16 concurrent calls over a limit of 2 streams, and 2 s of calls across 300 ms connection ages: all answered', async () => {
    const concurrent = await Promise.all(
      Array.from({ length: 16 }, (_, i) => grpcPredict(h.grpc, 'half', x([i]))),
    );
    concurrent.forEach((r, i) => {
      assert.deepEqual(Array.from(r.outputs['y']?.data as Float32Array), [0.5 * i + 2]);
    });
    const end = Date.now() + 2000;
    let calls = 0;
    await Promise.all(
      Array.from({ length: 4 }, async (_, worker) => {
        while (Date.now() < end) {
          const v = worker * 1000 + calls++;
          const r = await grpcPredict(h.grpc, 'half', x([v]));
          assert.deepEqual(Array.from(r.outputs['y']?.data as Float32Array), [0.5 * v + 2]);
        }
      }),
    );
    assert.ok(calls > 20, `${calls} calls`);
  });
});
