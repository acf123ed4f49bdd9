#!/usr/bin/env node
// Batch transform at full size: 1,000 images (MobileNetV2, SplitType None) and a 100,000-line
// JSON Lines file (half_plus_two, SplitType Line), through `visionserve transform` locally and
// from/to S3 (moto, started here), each output checked byte for byte against the per-record
// /invocations answers, an interrupted run resumed (nothing answered twice, nothing lost), and
// records/s against the in-process floor: the same /invocations logic called in this process on
// records already in memory, at the same concurrency (no files, no splitting, no output).
//
//   npm run build && node bench/transform.mjs [--images 1000] [--lines 100000] [--no-s3]
// Needs ../shared (models, photos); --only-s3 runs only the floors and the S3 rows; --no-s3 skips the S3 rows (otherwise scripts/s3/setup-moto.sh
// creates .venv-moto on first use). Writes bench/results/transform.json.
import { execFileSync, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createS3Store, resolveServerConfig, silentLogger, startVisionServer } from '@visionserve/server';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SHARED = join(ROOT, '..', 'shared');
const CLI = join(ROOT, 'packages', 'cli', 'bin', 'visionserve.js');
const { values } = parseArgs({
  options: {
    images: { type: 'string', default: '1000' },
    lines: { type: 'string', default: '100000' },
    'no-s3': { type: 'boolean', default: false },
    'only-s3': { type: 'boolean', default: false },
  },
});
const IMAGES = Number(values.images);
const LINES = Number(values.lines);
const PHOTOS = ['cat_tabby.jpg', 'dog_beagle.jpg', 'scene_jockey.jpg', 'scene_soccer.jpg', 'cat_chelsea.png'];
const CONCURRENCY = 2 * availableParallelism(); // the server's default MaxConcurrentTransforms

const log = (s) => process.stderr.write(`${s}\n`);
const rows = [];

function typeOf(name) {
  return name.endsWith('.png') ? 'image/png' : 'image/jpeg';
}

/** Runs the CLI; resolves with its JSON summary and wall time. `interruptWhen` sends SIGINT once it says so. */
function transform(args, env = process.env, interruptWhen) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [CLI, 'transform', ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    let timer;
    if (interruptWhen) {
      timer = setInterval(async () => {
        if (await interruptWhen().catch(() => false)) {
          clearInterval(timer);
          child.kill('SIGINT');
        }
      }, 50);
    }
    child.on('exit', (code) => {
      clearInterval(timer);
      const wallMs = performance.now() - t0;
      try {
        resolve({ summary: JSON.parse(out), code, wallMs });
      } catch {
        reject(new Error(`transform failed (${code}):\n${err}`));
      }
    });
  });
}

/** The in-process floor: `server.invoke` on bodies in memory, `concurrency` at a time; returns answers and records/s. */
async function floor(server, bodies, contentType, accept, recordsPerBody) {
  const answers = new Array(bodies.length);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const i = next++;
        const r = await server.invoke(
          { body: bodies[i], contentType: contentType(i), accept, customAttributes: '' },
          { signal: new AbortController().signal },
        );
        answers[i] = Buffer.from(r.body).toString();
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { answers, recordsPerSecond: (bodies.length * recordsPerBody) / seconds, seconds };
}

function row(what, records, summary, wallMs, floorRps) {
  const rps = summary.recordsPerSecond;
  rows.push({
    what,
    records,
    recordsPerSecond: Math.round(rps),
    wallSeconds: +(wallMs / 1000).toFixed(1),
    floor: Math.round(floorRps),
    ofFloor: +(rps / floorRps).toFixed(2),
  });
  log(
    `${what}: ${records} records, ${rps.toFixed(0)} records/s (${((rps / floorRps) * 100).toFixed(0)}% of the in-process floor ${floorRps.toFixed(0)}/s), CLI wall ${(wallMs / 1000).toFixed(1)} s`,
  );
}

async function startMoto() {
  execFileSync('bash', [join(ROOT, 'scripts/s3/setup-moto.sh')], { stdio: 'inherit' });
  const child = spawn(join(ROOT, '.venv-moto/bin/python'), [join(ROOT, 'scripts/s3/start-moto.py')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
  const info = JSON.parse(line);
  return {
    env: {
      ...process.env,
      AWS_ENDPOINT_URL_S3: info.endpoint,
      AWS_ACCESS_KEY_ID: info.accessKeyId,
      AWS_SECRET_ACCESS_KEY: info.secretAccessKey,
      AWS_REGION: 'us-east-1',
    },
    stop: () => {
      child.stdin.end();
      child.kill('SIGTERM');
    },
  };
}

const work = await mkdtemp(join(tmpdir(), 'vs-bench-transform-'));
try {
  // --- inputs
  const model = join(work, 'mobilenet');
  await mkdir(join(model, '1'), { recursive: true });
  await copyFile(join(SHARED, 'models', 'mobilenetv2-12-int8.onnx'), join(model, '1', 'model.onnx'));
  await copyFile(join(SHARED, 'models', 'imagenet_synset.txt'), join(model, 'imagenet_synset.txt'));
  await writeFile(join(model, 'visionserve.json'), JSON.stringify(MOBILENET_V2_VISION_CONFIG));
  const demo = join(work, 'demo');
  execFileSync(process.execPath, [CLI, 'generate-demo', demo]);
  const hp2 = join(demo, 'half_plus_two');
  await mkdir(join(work, 'images'));
  const names = [];
  const photos = await Promise.all(PHOTOS.map((p) => readFile(join(SHARED, 'images', p))));
  for (let i = 0; i < IMAGES; i++) {
    const name = `${String(i).padStart(5, '0')}-${PHOTOS[i % PHOTOS.length]}`;
    names.push(name);
    await writeFile(join(work, 'images', name), photos[i % PHOTOS.length]);
  }
  await mkdir(join(work, 'jsonl'));
  const records = Array.from({ length: LINES }, (_, i) => `${(i % 10_000) / 8}`);
  await writeFile(join(work, 'jsonl', 'data.jsonl'), records.join('\n') + '\n');
  log(`inputs: ${IMAGES} images, ${LINES} JSON Lines records in ${work}; concurrency ${CONCURRENCY}`);

  // --- floors (and the per-record answers the outputs must equal)
  const imgServer = await startVisionServer(
    resolveServerConfig({
      grpcPort: -1,
      restPort: -1,
      sagemakerPort: -1,
      sagemakerModelDir: model,
      fileSystemPollSeconds: 0,
      maxQueueWaitMs: 0,
      logLevel: 'silent',
    }),
    silentLogger,
  );
  const imageBodies = names.map((n, i) => photos[i % PHOTOS.length]);
  await floor(imgServer, imageBodies.slice(0, 20), (i) => typeOf(names[i]), 'application/json', 1); // warm
  const imgFloor = await floor(imgServer, imageBodies, (i) => typeOf(names[i]), 'application/json', 1);
  await imgServer.close();
  log(`image floor: ${imgFloor.recordsPerSecond.toFixed(1)} images/s`);
  const hpServer = await startVisionServer(
    resolveServerConfig({
      grpcPort: -1,
      restPort: -1,
      sagemakerPort: -1,
      modelBasePath: hp2,
      modelName: 'half_plus_two',
      fileSystemPollSeconds: 0,
      maxQueueWaitMs: 0,
      logLevel: 'silent',
    }),
    silentLogger,
  );
  const lineBodies = records.map((r) => Buffer.from(r));
  const single = await floor(hpServer, lineBodies, () => 'application/jsonlines', 'application/jsonlines', 1);
  const whole = await floor(
    hpServer,
    [Buffer.from(records.join('\n'))],
    () => 'application/jsonlines',
    'application/jsonlines',
    LINES,
  );
  await hpServer.close();
  const perRecordLines = single.answers.join('\n') + '\n';
  if (whole.answers[0] + '\n' !== perRecordLines)
    throw new Error('a multi-record answer differs from the per-record answers');
  log(
    `JSON Lines floor: SingleRecord ${single.recordsPerSecond.toFixed(0)}/s, MultiRecord ${whole.recordsPerSecond.toFixed(0)}/s`,
  );

  const checkImages = async (dir) => {
    for (let i = 0; i < IMAGES; i++) {
      const got = await readFile(join(dir, `${names[i]}.out`), 'utf8');
      if (got !== imgFloor.answers[i])
        throw new Error(`${names[i]}.out differs from its /invocations answer`);
    }
  };
  const checkLines = async (file) => {
    if ((await readFile(file, 'utf8')) !== perRecordLines)
      throw new Error(`${file} differs from the per-record answers`);
  };

  const imgArgs = (input, output) => [
    `--input=${input}`,
    `--output=${output}`,
    `--sagemaker_model_dir=${model}`,
  ];
  const lineArgs = (input, output, strategy) => [
    `--input=${input}`,
    `--output=${output}`,
    `--model_base_path=${hp2}`,
    '--split-type=Line',
    '--assemble-with=Line',
    `--batch-strategy=${strategy}`,
  ];
  let r;
  if (!values['only-s3']) {
    // --- local
    r = await transform(imgArgs(join(work, 'images'), join(work, 'out-images')));
    await checkImages(join(work, 'out-images'));
    row('images, local (None)', IMAGES, r.summary, r.wallMs, imgFloor.recordsPerSecond);
    r = await transform(lineArgs(join(work, 'jsonl'), join(work, 'out-multi'), 'MultiRecord'));
    await checkLines(join(work, 'out-multi', 'data.jsonl.out'));
    row('JSON Lines, local, MultiRecord (6 MiB)', LINES, r.summary, r.wallMs, whole.recordsPerSecond);
    r = await transform(lineArgs(join(work, 'jsonl'), join(work, 'out-single'), 'SingleRecord'));
    await checkLines(join(work, 'out-single', 'data.jsonl.out'));
    row('JSON Lines, local, SingleRecord', LINES, r.summary, r.wallMs, single.recordsPerSecond);

    // --- interrupted and resumed, full size
    const countOut = async (dir) =>
      (await readdir(dir).catch(() => [])).filter((n) => n.endsWith('.out')).length;
    const a = await transform(
      imgArgs(join(work, 'images'), join(work, 'out-resume')),
      process.env,
      async () => (await countOut(join(work, 'out-resume'))) >= IMAGES / 3,
    );
    const b = await transform(imgArgs(join(work, 'images'), join(work, 'out-resume')));
    if (
      a.summary.records + b.summary.records !== IMAGES ||
      a.summary.filesWritten + b.summary.filesWritten !== IMAGES
    )
      throw new Error('images: resumed run did work twice or lost some');
    await checkImages(join(work, 'out-resume'));
    log(
      `images interrupted after ${a.summary.filesWritten} and resumed with ${b.summary.filesWritten} (skipped ${b.summary.filesSkipped}): every output equal`,
    );
    const ckpt = join(work, 'out-resume-l', '.transform-state', 'data.jsonl.out.checkpoint');
    const c = await transform(
      lineArgs(join(work, 'jsonl'), join(work, 'out-resume-l'), 'SingleRecord'),
      process.env,
      async () => JSON.parse(await readFile(ckpt, 'utf8')).records >= LINES / 3,
    );
    const d = await transform(lineArgs(join(work, 'jsonl'), join(work, 'out-resume-l'), 'SingleRecord'));
    if (c.summary.records + d.summary.records !== LINES || d.summary.recordsResumed !== c.summary.records)
      throw new Error('lines: resumed run did work twice or lost some');
    await checkLines(join(work, 'out-resume-l', 'data.jsonl.out'));
    log(
      `JSON Lines interrupted after ${c.summary.records} records and resumed with ${d.summary.records}: output equal`,
    );
  }
  // --- S3
  if (!values['no-s3']) {
    const moto = await startMoto();
    try {
      const store = createS3Store({ env: moto.env });
      const { S3Client, CreateBucketCommand } = await import('@aws-sdk/client-s3');
      const client = new S3Client({
        endpoint: moto.env.AWS_ENDPOINT_URL_S3,
        forcePathStyle: true,
        region: 'us-east-1',
        credentials: {
          accessKeyId: moto.env.AWS_ACCESS_KEY_ID,
          secretAccessKey: moto.env.AWS_SECRET_ACCESS_KEY,
        },
      });
      await client.send(new CreateBucketCommand({ Bucket: 'bench' }));
      client.destroy();
      const t0 = performance.now();
      for (let i = 0; i < IMAGES; i += 16) {
        await Promise.all(
          names
            .slice(i, i + 16)
            .map((n, j) =>
              store.put({ bucket: 'bench', key: `images/${n}` }, photos[(i + j) % PHOTOS.length]),
            ),
        );
      }
      await store.put({ bucket: 'bench', key: 'jsonl/data.jsonl' }, records.join('\n') + '\n');
      log(`uploaded to S3 in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      r = await transform(imgArgs('s3://bench/images/', 's3://bench/out-images'), moto.env);
      for (let i = 0; i < IMAGES; i++) {
        const got = (await store.get({ bucket: 'bench', key: `out-images/${names[i]}.out` })).toString();
        if (got !== imgFloor.answers[i]) throw new Error(`s3 ${names[i]}.out differs`);
      }
      row('images, S3 -> S3 (None)', IMAGES, r.summary, r.wallMs, imgFloor.recordsPerSecond);
      r = await transform(lineArgs('s3://bench/jsonl/', 's3://bench/out-jsonl', 'MultiRecord'), moto.env);
      if (
        (await store.get({ bucket: 'bench', key: 'out-jsonl/data.jsonl.out' })).toString() !== perRecordLines
      )
        throw new Error('s3 jsonl output differs');
      row('JSON Lines, S3 -> S3, MultiRecord', LINES, r.summary, r.wallMs, whole.recordsPerSecond);
    } finally {
      moto.stop();
    }
  }

  log(
    '\n| run | records | records/s | in-process floor/s | of floor | CLI wall s |\n| --- | --- | --- | --- | --- | --- |',
  );
  for (const x of rows)
    log(
      `| ${x.what} | ${x.records} | ${x.recordsPerSecond} | ${x.floor} | ${x.ofFloor} | ${x.wallSeconds} |`,
    );
  await mkdir(join(ROOT, 'bench', 'results'), { recursive: true });
  await writeFile(
    join(ROOT, 'bench', 'results', 'transform.json'),
    JSON.stringify({ when: new Date().toISOString(), concurrency: CONCURRENCY, rows }, null, 2),
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
