/**
 * Large outputs lent from the inference workers' pools of shared buffers (RunOptions.lease):
 * the bytes equal raw onnxruntime's, and pooled memory is never refilled while a response
 * still views it (held leases at the session level; concurrent responses over real sockets).
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import type { Tensor } from '@visionserve/protocol';
import {
  createKServeGrpcClient,
  createKServeHttpClient,
  createTfsGrpcClient,
  type Predictor,
} from '@visionserve/client';
import { createOnnxSessionFactory, createOutputLease, silentLogger, type Session } from '@visionserve/server';
import { rawDetectorModel } from '../src/tools/fixture-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

/** 4,096 anchors × 64 classes: a 1 MiB scores output (lent) and 64 KiB of boxes (moved). */
const SIZE = 80;
const ANCHORS = 4096;
const CLASSES = 64;
const MODEL = rawDetectorModel({ size: SIZE, anchors: ANCHORS, classes: CLASSES });

/** A distinct image per seed. */
function image(seed: number): Tensor {
  const pixels = new Uint8Array(SIZE * SIZE * 3);
  for (let i = 0; i < pixels.length; i++) pixels[i] = (i * 31 + seed * 97 + ((i * seed) >> 5)) & 0xff;
  return { dtype: 'uint8', shape: [1, SIZE, SIZE, 3], data: pixels };
}

const bufferOf = (t: Tensor | undefined): ArrayBufferLike => (t!.data as Float32Array).buffer;

const bytesOf = (t: Tensor): Buffer => {
  const data = t.data as Float32Array;
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
};

describe('output lending (real onnxruntime)', () => {
  let root: string;
  let base: string;
  let raw: ort.InferenceSession;
  /** Raw onnxruntime's outputs for image(seed), by output name. */
  const expected = new Map<number, Record<string, Buffer>>();
  const expect = async (seed: number): Promise<Record<string, Buffer>> => {
    let e = expected.get(seed);
    if (e === undefined) {
      const input = image(seed);
      const out = await raw.run({
        input_tensor: new ort.Tensor('uint8', input.data as Uint8Array, input.shape),
      });
      e = {};
      for (const [name, t] of Object.entries(out)) {
        const data = t.data as Float32Array;
        e[name] = Buffer.from(data.slice().buffer);
      }
      expected.set(seed, e);
    }
    return e;
  };
  const check = async (
    outputs: Readonly<Record<string, Tensor>>,
    seed: number,
    what: string,
  ): Promise<void> => {
    const e = await expect(seed);
    for (const name of ['raw_detection_boxes', 'raw_detection_scores']) {
      const got = outputs[name];
      assert.ok(got, `${what}: ${name} missing`);
      assert.ok(bytesOf(got).equals(e[name]!), `${what}: ${name} differs from raw onnxruntime`);
    }
  };

  before(async () => {
    root = await tempRepo();
    base = await placeModel(root, 'det', 1, MODEL);
    raw = await ort.InferenceSession.create(MODEL);
  });
  after(async () => {
    await raw.release();
    await rm(root, { recursive: true, force: true });
  });

  it('lends only with a lease, and never refills memory a held lease still views', async () => {
    const factory = createOnnxSessionFactory({ logger: silentLogger, instances: 1 });
    const session: Session = await factory.load({
      modelName: 'det',
      version: 1,
      path: `${base}/1`,
      basePath: base,
    });
    try {
      const plain = await session.run({ input_tensor: image(1) });
      await check(plain, 1, 'no lease');
      assert.ok(
        bufferOf(plain['raw_detection_scores']) instanceof ArrayBuffer,
        'without a lease: moved, not lent',
      );

      const first = createOutputLease();
      const a = await session.run({ input_tensor: image(2) }, { lease: first });
      assert.ok(bufferOf(a['raw_detection_scores']) instanceof SharedArrayBuffer, 'a large output is lent');
      assert.ok(bufferOf(a['raw_detection_boxes']) instanceof ArrayBuffer, 'a small output is moved');
      await check(a, 2, 'lent');
      // A run that fails in the worker must not give back slots it did not take.
      const wrong: Tensor = { dtype: 'uint8', shape: [1, SIZE, SIZE, 1], data: new Uint8Array(SIZE * SIZE) };
      await assert.rejects(session.run({ input_tensor: wrong }, { lease: createOutputLease() }));
      // More runs while `a` is held: none of them may write into its memory.
      const held = [];
      for (let seed = 3; seed < 7; seed++) {
        const lease = createOutputLease();
        held.push({ lease, seed, outputs: await session.run({ input_tensor: image(seed) }, { lease }) });
      }
      await check(a, 2, 'held while later runs finished');
      for (const h of held) await check(h.outputs, h.seed, `held run ${h.seed}`);
      // Released slots are refilled by later runs; still-held ones stay intact.
      first.release();
      for (const h of held.slice(0, 2)) h.lease.release();
      for (let seed = 7; seed < 12; seed++) {
        const lease = createOutputLease();
        const out = await session.run({ input_tensor: image(seed) }, { lease });
        await check(out, seed, `run ${seed} after releases`);
        lease.release();
      }
      for (const h of held.slice(2)) await check(h.outputs, h.seed, `still held run ${h.seed}`);
      // A lease released before the run finishes gives the slot straight back.
      const early = createOutputLease();
      early.release();
      await check(await session.run({ input_tensor: image(12) }, { lease: early }), 12, 'released early');
    } finally {
      await session.close();
    }
  });

  describe('responses over real sockets (server process, one instance)', () => {
    let server: ServerProcess;
    before(async () => {
      server = await startServerProcess([
        '--model_name=det',
        `--model_base_path=${base}`,
        '--model_instances=1',
        '--max_queue_wait_ms=0',
        '--enable_serialization_as_tensor_content',
      ]);
    });
    after(async () => {
      server.child.kill('SIGTERM');
      await server.exited;
    });

    it('concurrent responses over gRPC (both client transports), KServe gRPC and KServe HTTP equal raw onnxruntime byte for byte', async () => {
      const clients: [string, Predictor & { close(): void }][] = [
        ['tfs-grpc', createTfsGrpcClient({ address: `127.0.0.1:${server.ports.grpc!}` })],
        ['kserve-grpc', createKServeGrpcClient({ address: `127.0.0.1:${server.ports.grpc!}` })],
        ['kserve-http', createKServeHttpClient({ baseUrl: `http://127.0.0.1:${server.ports.rest!}` })],
        [
          'tfs-grpc-node',
          createTfsGrpcClient({ address: `127.0.0.1:${server.ports.grpc!}`, transport: 'node' }),
        ],
        [
          'kserve-grpc-node',
          createKServeGrpcClient({ address: `127.0.0.1:${server.ports.grpc!}`, transport: 'node' }),
        ],
      ];
      try {
        // Many more calls in flight than the one instance runs: each response is written
        // while later runs finish, over 1 MiB HTTP/2 windows, so writes wait on the client.
        const calls: Promise<void>[] = [];
        for (let i = 0; i < 40; i++) {
          const [name, client] = clients[i % clients.length]!;
          const seed = 100 + i;
          calls.push(
            (async () => {
              const result = await client.predict('det', { input_tensor: image(seed) });
              await check(result.outputs, seed, `${name} call ${i}`);
            })(),
          );
        }
        await Promise.all(calls);
      } finally {
        for (const [, client] of clients) client.close();
      }
    });
  });

  describe('34 MB answers (full-size raw detector) over the client transports', () => {
    const FULL = rawDetectorModel();
    let server: ServerProcess;
    let fullRaw: ort.InferenceSession;
    let fullBase: string;
    before(async () => {
      fullBase = await placeModel(root, 'full', 1, FULL);
      fullRaw = await ort.InferenceSession.create(FULL);
      server = await startServerProcess([
        '--model_name=full',
        `--model_base_path=${fullBase}`,
        '--enable_serialization_as_tensor_content',
      ]);
    });
    after(async () => {
      server.child.kill('SIGTERM');
      await server.exited;
      await fullRaw.release();
    });

    it('lean and node:http2 channels receive the same bytes as raw onnxruntime; a deadline mid-call leaves the channel usable', async () => {
      const input: Tensor = {
        dtype: 'uint8',
        shape: [1, 640, 640, 3],
        data: new Uint8Array(640 * 640 * 3).map((_, i) => (i * 7) & 0xff),
      };
      const out = await fullRaw.run({
        input_tensor: new ort.Tensor('uint8', input.data as Uint8Array, input.shape),
      });
      const want = (name: string): Buffer => {
        const data = out[name]!.data as Float32Array;
        return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      };
      const address = `127.0.0.1:${server.ports.grpc!}`;
      for (const transport of ['lean', 'node'] as const) {
        const clients: Predictor[] = [
          createTfsGrpcClient({ address, transport }),
          createKServeGrpcClient({ address, transport }),
        ];
        try {
          for (const client of clients) {
            await assert.rejects(
              client.predict('full', { input_tensor: input }, { timeoutMs: 15 }),
              (e: unknown) => e instanceof Error && 'code' in e && e.code === 4,
            );
            const results = await Promise.all([
              client.predict('full', { input_tensor: input }),
              client.predict('full', { input_tensor: input }),
            ]);
            for (const result of results) {
              for (const name of ['raw_detection_boxes', 'raw_detection_scores']) {
                assert.ok(bytesOf(result.outputs[name]!).equals(want(name)), `${transport}: ${name}`);
              }
              // The scores (the largest tensor) view the received message without a copy.
              const scores = result.outputs['raw_detection_scores']!.data as Float32Array;
              assert.ok(scores.buffer.byteLength > scores.byteLength, `${transport}: scores copied`);
            }
          }
        } finally {
          for (const client of clients) (client as unknown as { close(): void }).close();
        }
      }
    });
  });
});
