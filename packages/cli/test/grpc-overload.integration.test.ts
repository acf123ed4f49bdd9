/**
 * The overload bench's gRPC load generator against a real server process that sheds load
 * (MobileNetV2 int8, `--max_queued_requests=4`): a burst of 600 KB Predict calls on its one
 * node:http2 connection, more request bytes than node:http2's maxSessionMemory had allowed
 * (1024 MB). Every call must end OK or UNAVAILABLE. With the old setting the generator itself
 * reset almost every stream whose answer arrived (RST_STREAM 11, no status) once its queued
 * requests passed 1 GiB: issue 31 item 7's "0 % goodput at 3×", which had been taken for the
 * server's flood limit.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { PredictRequestSchema, writePredictRequest } from '@visionserve/protocol/tfs-proto';
import { loadCase, stageRepository } from '../src/bench/bench-cases.js';
import { type ShotResult, createGrpcShooter } from '../src/bench/overload-shooters.js';
import { type ServerProcess, startServerProcess } from '../src/bench/server-process.js';
import { SHARED } from './helpers/shared.js';

/** 1900 × 588 KiB ≈ 1.1 GB queued at once on the connection: past the old 1024 MB. */
const BURST = 1900;

describe('gRPC load generator against a shedding server', () => {
  let root: string;
  let server: ServerProcess;
  let body: Uint8Array;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'vs-grpc-overload-'));
    const repo = await stageRepository(root, SHARED, ['mobilenet']);
    const c = await loadCase('mobilenet', SHARED);
    body = Buffer.concat(
      writePredictRequest(create(PredictRequestSchema, { modelSpec: { name: c.model } }), c.inputs, true),
    );
    server = await startServerProcess([`--model_config_file=${repo.configFile}`, '--max_queued_requests=4']);
  });
  after(async () => {
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  });

  it(`${BURST} concurrent 600 KB calls on one connection: each answered OK or UNAVAILABLE`, async () => {
    const shooter = createGrpcShooter({
      address: `127.0.0.1:${server.grpcPort}`,
      path: '/tensorflow.serving.PredictionService/Predict',
      message: body,
      timeoutMs: 120_000,
    });
    const labels: Record<string, number> = {};
    const fire = (n: number): Promise<unknown> =>
      Promise.all(
        Array.from(
          { length: n },
          () =>
            new Promise<void>((resolve) => {
              shooter.fire((r: ShotResult) => {
                labels[r.label] = (labels[r.label] ?? 0) + 1;
                resolve();
              });
            }),
        ),
      );
    try {
      // As in the bench, the burst follows a first call: the server's SETTINGS (1000 streams)
      // are known, so node:http2 holds calls past that limit instead of sending them.
      await fire(1);
      await fire(BURST);
    } finally {
      shooter.close();
    }
    const { OK = 0, UNAVAILABLE = 0, ...other } = labels;
    assert.deepEqual(other, {}, JSON.stringify(labels));
    assert.equal(OK + UNAVAILABLE, BURST + 1);
    assert.ok(OK >= 1 && UNAVAILABLE >= 1, JSON.stringify(labels));
    assert.equal(shooter.connections, 1);
  });
});
