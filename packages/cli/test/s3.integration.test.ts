/**
 * S3 against a real S3-compatible server (moto, signatures checked): s3:// base paths
 * (versions added and removed in the bucket are picked up), bad credentials and missing
 * buckets, model.tar.gz in S3 for the multi-model API, and transform from/to S3.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type Logger,
  type S3Store,
  createS3Store,
  resolveServerConfig,
  silentLogger,
  startVisionServer,
} from '@visionserve/server';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { type S3Server, startS3Server } from './helpers/s3-server.js';
import { request } from './helpers/sagemaker-models.js';
import { image } from './helpers/shared.js';

const run = promisify(execFile);
const CLI = new URL('../../bin/visionserve.js', import.meta.url).pathname;

/** A logger that keeps error and warning messages (with their error text) for assertions. */
function recordingLogger(lines: string[]): Logger {
  const log =
    (level: string) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      const error = fields?.['error'];
      lines.push(`${level} ${msg} ${error instanceof Error ? error.message : ''}`);
    };
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: log('warn'),
    error: log('error'),
    child: () => logger,
  };
  return logger;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe('S3 (moto, auth on)', () => {
  let s3: S3Server;
  let store: S3Store;
  const saved = { ...process.env };
  before(async () => {
    s3 = await startS3Server();
    Object.assign(process.env, s3.env);
    store = createS3Store({ env: s3.env });
    const { S3Client, CreateBucketCommand } = await import('@aws-sdk/client-s3');
    const client = new S3Client({
      endpoint: s3.endpoint,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    await client.send(new CreateBucketCommand({ Bucket: 'models' }));
    await client.send(new CreateBucketCommand({ Bucket: 'data' }));
    client.destroy();
  });
  after(async () => {
    for (const key of Object.keys(s3.env)) {
      if (saved[key] === undefined) Reflect.deleteProperty(process.env, key);
      else process.env[key] = saved[key];
    }
    await s3.stop();
  });

  it('serves an s3:// base path and follows versions added and removed in the bucket; keeps serving when the bucket goes', async () => {
    await store.put({ bucket: 'models', key: 'hp2/1/model.onnx' }, halfPlusTwoModel());
    const cache = await mkdtemp(join(tmpdir(), 'vs-s3-cache-'));
    const lines: string[] = [];
    const server = await startVisionServer(
      resolveServerConfig({
        host: '127.0.0.1',
        grpcPort: -1,
        restPort: 0,
        sagemakerPort: -1,
        modelName: 'hp2',
        modelBasePath: 's3://models/hp2',
        modelCacheDir: cache,
        fileSystemPollSeconds: 1,
        logLevel: 'silent',
        maxQueueWaitMs: 0,
      }),
      recordingLogger(lines),
    );
    const rest = `http://127.0.0.1:${server.ports.rest!}/v1/models/hp2`;
    const versions = async (): Promise<string[]> =>
      (
        (await request(rest)).json() as { model_version_status: { version: string; state: string }[] }
      ).model_version_status
        .filter((s) => s.state === 'AVAILABLE')
        .map((s) => s.version);
    try {
      assert.deepEqual(await versions(), ['1']);
      const predict = async (): Promise<unknown> =>
        (await request(`${rest}:predict`, { body: '{"instances": [1.0, 2.0]}' })).json();
      assert.deepEqual(await predict(), { predictions: [2.5, 3] });
      // A new version in the bucket (zero-padded, as TF Serving exports are) is downloaded whole and swapped in.
      await store.put({ bucket: 'models', key: 'hp2/00000002/model.onnx' }, halfPlusTwoModel());
      await until('version 2', async () => (await versions()).join() === '2');
      // Removed from the bucket: unloaded; version 1 serves again (latest policy).
      const { S3Client, DeleteObjectCommand, DeleteBucketCommand } = await import('@aws-sdk/client-s3');
      const client = new S3Client({
        endpoint: s3.endpoint,
        forcePathStyle: true,
        region: 'us-east-1',
        credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
      });
      await client.send(new DeleteObjectCommand({ Bucket: 'models', Key: 'hp2/00000002/model.onnx' }));
      await until('version 1 again', async () => (await versions()).join() === '1');
      // The bucket disappears: a clear error in the log, and what was loaded keeps serving.
      await client.send(new DeleteObjectCommand({ Bucket: 'models', Key: 'hp2/1/model.onnx' }));
      await client.send(new DeleteBucketCommand({ Bucket: 'models' }));
      client.destroy();
      await until('the sync error', () =>
        Promise.resolve(lines.some((l) => /bucket "models" does not exist/.test(l))),
      );
      assert.deepEqual(await predict(), { predictions: [2.5, 3] });
      assert.deepEqual(await versions(), ['1']);
    } finally {
      await server.close();
    }
  });

  it('refuses to start on bad credentials or a missing bucket, with a message that says so', async () => {
    const start = (basePath: string): Promise<unknown> =>
      startVisionServer(
        resolveServerConfig({
          grpcPort: -1,
          restPort: -1,
          sagemakerPort: -1,
          modelBasePath: basePath,
          logLevel: 'silent',
        }),
        silentLogger,
      );
    await assert.rejects(start('s3://no-such-bucket/m'), /bucket "no-such-bucket" does not exist/);
    process.env['AWS_SECRET_ACCESS_KEY'] = 'wrong-secret';
    try {
      await assert.rejects(start('s3://data/m'), /S3 rejected the credentials \(SignatureDoesNotMatch\)/);
    } finally {
      process.env['AWS_SECRET_ACCESS_KEY'] = s3.secretAccessKey;
    }
  });

  it('multi-model POST /models loads a model.tar.gz from S3; a missing object is 404 with the reason', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vs-s3-mme-'));
    await mkdir(join(dir, 'm', '1'), { recursive: true });
    await writeFile(join(dir, 'm', '1', 'model.onnx'), halfPlusTwoModel());
    await run('tar', ['-czf', join(dir, 'model.tar.gz'), '-C', join(dir, 'm'), '.']);
    await store.put(
      { bucket: 'data', key: 'mme/hp2/model.tar.gz' },
      await readFile(join(dir, 'model.tar.gz')),
    );
    const h = await startVisionServer(
      resolveServerConfig({
        host: '127.0.0.1',
        grpcPort: -1,
        restPort: -1,
        sagemakerPort: 0,
        sagemakerMultiModel: true,
        modelCacheDir: join(dir, 'cache'),
        logLevel: 'silent',
      }),
      silentLogger,
    );
    try {
      const url = `http://127.0.0.1:${h.ports.sagemaker!}`;
      const load = await request(`${url}/models`, {
        body: JSON.stringify({ model_name: 'hp2', url: 's3://data/mme/hp2/model.tar.gz' }),
      });
      assert.equal(load.status, 200, load.text);
      const inv = await request(`${url}/models/hp2/invoke`, {
        body: '{"instances": [1.0, 2.0]}',
        headers: { 'Content-Type': 'application/json' },
      });
      assert.deepEqual(inv.json(), { predictions: [2.5, 3] });
      const missing = await request(`${url}/models`, {
        body: JSON.stringify({ model_name: 'gone', url: 's3://data/mme/gone/model.tar.gz' }),
      });
      assert.equal(missing.status, 404);
      assert.match(missing.text, /model archive s3:\/\/data\/mme\/gone\/model.tar.gz does not exist/);
    } finally {
      await h.close();
    }
  });

  it('transform reads inputs from S3 and writes <name>.out back, matching a local run', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vs-s3-transform-'));
    const model = join(dir, 'model');
    await mkdir(join(model, '1'), { recursive: true });
    await writeFile(join(model, '1', 'model.onnx'), halfPlusTwoModel());
    const lines = Array.from({ length: 2000 }, (_, i) => `${i % 97}.5`).join('\n') + '\n';
    await mkdir(join(dir, 'in'));
    await writeFile(join(dir, 'in', 'a.jsonl'), lines);
    await writeFile(join(dir, 'in', 'b.jsonl'), '1.0\n2.0\n');
    await store.put({ bucket: 'data', key: 'in/a.jsonl' }, lines);
    await store.put({ bucket: 'data', key: 'in/b.jsonl' }, '1.0\n2.0\n');
    const env = { ...process.env, ...s3.env };
    const args = (input: string, output: string): string[] => [
      CLI,
      'transform',
      `--input=${input}`,
      `--output=${output}`,
      '--split-type=Line',
      '--assemble-with=Line',
      '--batch-strategy=MultiRecord',
      `--model_base_path=${model}`,
    ];
    const remote = await run(process.execPath, args('s3://data/in/', 's3://data/out'), { env });
    const summary = JSON.parse(remote.stdout) as { filesWritten: number; records: number };
    assert.equal(summary.filesWritten, 2);
    assert.equal(summary.records, 2002);
    await run(process.execPath, args(join(dir, 'in'), join(dir, 'out')), { env });
    for (const name of ['a.jsonl.out', 'b.jsonl.out']) {
      const fromS3 = (await store.get({ bucket: 'data', key: `out/${name}` })).toString();
      assert.equal(fromS3, await readFile(join(dir, 'out', name), 'utf8'));
    }
    assert.equal(
      (await store.get({ bucket: 'data', key: 'out/b.jsonl.out' })).toString(),
      '{"predictions":[2.5]}\n{"predictions":[3]}\n',
    );
    // Run again: everything is there already, nothing is sent.
    const again = JSON.parse(
      (await run(process.execPath, args('s3://data/in/', 's3://data/out'), { env })).stdout,
    ) as {
      filesSkipped: number;
      requests: number;
    };
    assert.deepEqual([again.filesSkipped, again.requests], [2, 0]);
    // An image from S3 too.
    await store.put({ bucket: 'data', key: 'img/cat.jpg' }, image('cat_tabby.jpg'));
    assert.ok((await readdir(dir)).length > 0);
  });
});
