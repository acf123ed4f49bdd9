/**
 * `visionserve transform` end to end (the CLI as a child process): outputs equal the
 * per-record /invocations answers of a real server, in-process and against --endpoint;
 * an interrupted job resumes with nothing answered twice or lost; failed records go to the
 * failures manifest. Sizes here are CI-sized; bench/transform.mjs runs 1,000 images and
 * 100,000 lines (locally and through S3) and measures throughput.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { request } from './helpers/sagemaker-models.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { image, sharedModel } from './helpers/shared.js';

const run = promisify(execFile);
const CLI = new URL('../../bin/visionserve.js', import.meta.url).pathname;
const PHOTOS = ['cat_tabby.jpg', 'dog_beagle.jpg', 'scene_jockey.jpg', 'scene_soccer.jpg', 'cat_chelsea.png'];

interface Summary {
  filesWritten: number;
  filesSkipped: number;
  filesFailed: number;
  records: number;
  recordsResumed: number;
  recordsFailed: number;
  requests: number;
  interrupted: boolean;
  failuresManifest?: string;
}

async function transform(
  args: readonly string[],
): Promise<{ summary: Summary; code: number; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, 'transform', ...args], {
      maxBuffer: 64 << 20,
    });
    return { summary: JSON.parse(stdout) as Summary, code: 0, stderr };
  } catch (error) {
    const e = error as { stdout: string; stderr: string; code: number };
    if (e.stdout === '') throw new Error(e.stderr);
    return { summary: JSON.parse(e.stdout) as Summary, code: e.code, stderr: e.stderr };
  }
}

/** Runs the CLI until `ready()` says so, then SIGINT; resolves with the summary of the interrupted run. */
async function interruptWhen(
  args: readonly string[],
  ready: () => Promise<boolean>,
): Promise<{ summary: Summary; code: number }> {
  const child: ChildProcess = spawn(process.execPath, [CLI, 'transform', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number>((resolve) => {
    child.once('exit', (code) => {
      resolve(code ?? -1);
    });
  });
  let sent = false;
  while (!sent && child.exitCode === null) {
    if (await ready()) {
      child.kill('SIGINT');
      sent = true;
    } else await new Promise((r) => setTimeout(r, 25));
  }
  const code = await exited;
  assert.ok(sent, `the job finished before it could be interrupted:\n${stderr}`);
  return { summary: JSON.parse(stdout) as Summary, code };
}

describe('visionserve transform: images (SplitType None)', () => {
  let dir: string;
  let h: Harness;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vs-transform-img-'));
    const model = join(dir, 'model');
    await mkdir(join(model, '1'), { recursive: true });
    await copyFile(sharedModel('mobilenetv2-12-int8.onnx'), join(model, '1', 'model.onnx'));
    await copyFile(sharedModel('imagenet_synset.txt'), join(model, 'imagenet_synset.txt'));
    await writeFile(join(model, 'visionserve.json'), JSON.stringify(MOBILENET_V2_VISION_CONFIG));
    await mkdir(join(dir, 'in', 'sub'), { recursive: true });
    for (let i = 0; i < 40; i++) {
      const photo = PHOTOS[i % PHOTOS.length]!;
      await writeFile(
        join(dir, 'in', i % 7 === 0 ? 'sub' : '', `${String(i).padStart(3, '0')}-${photo}`),
        image(photo),
      );
    }
    await writeFile(join(dir, 'in', 'zz-broken.jpg'), 'not a JPEG');
    h = await startHarness({ sagemakerModelDir: model, sagemakerPort: 0 });
  });
  after(async () => {
    await h.close();
  });

  /** What /invocations answers for one input file. */
  const answer = async (rel: string): Promise<string> => {
    const type = rel.endsWith('.png') ? 'image/png' : 'image/jpeg';
    return (
      await request(`${h.sagemaker}/invocations`, {
        body: await readFile(join(dir, 'in', rel)),
        headers: { 'Content-Type': type },
      })
    ).text;
  };

  it('in-process and --endpoint outputs equal per-image /invocations answers; the broken file is in the failures manifest', async () => {
    const model = join(dir, 'model');
    const local = await transform([
      `--input=${join(dir, 'in')}`,
      `--output=${join(dir, 'out')}`,
      `--sagemaker_model_dir=${model}`,
    ]);
    assert.equal(local.code, 1, local.stderr);
    assert.deepEqual(
      [local.summary.filesWritten, local.summary.filesFailed, local.summary.recordsFailed],
      [40, 1, 1],
    );
    const manifest = (await readFile(join(dir, 'out', 'transform-failures.jsonl'), 'utf8'))
      .trim()
      .split('\n');
    assert.equal(manifest.length, 1);
    assert.match(manifest[0]!, /zz-broken\.jpg.*"status":400.*Unable to decode image/);
    const viaEndpoint = await transform([
      `--input=${join(dir, 'in')}`,
      `--output=${join(dir, 'out-ep')}`,
      `--endpoint=${h.sagemaker}`,
    ]);
    assert.equal(viaEndpoint.summary.filesWritten, 40);
    const names = (await readdir(join(dir, 'in'), { recursive: true })).filter(
      (n) => /\.(jpg|png)$/.test(n) && !n.includes('broken'),
    );
    assert.equal(names.length, 40);
    for (const rel of names) {
      const want = await answer(rel);
      assert.equal(await readFile(join(dir, 'out', `${rel}.out`), 'utf8'), want, rel);
      assert.equal(await readFile(join(dir, 'out-ep', `${rel}.out`), 'utf8'), want, rel);
    }
    const cat = JSON.parse(await readFile(join(dir, 'out', 'sub', '000-cat_tabby.jpg.out'), 'utf8')) as {
      predictions: { class_id: number }[][];
    };
    assert.equal(cat.predictions[0]![0]!.class_id, 281);
  });

  it('interrupted (SIGINT) and resumed: every image answered exactly once', async () => {
    const out = join(dir, 'out-resume');
    const args = [
      `--input=${join(dir, 'in')}`,
      `--output=${out}`,
      `--endpoint=${h.sagemaker}`,
      '--max-concurrent-transforms=1',
    ];
    const first = await interruptWhen(args, async () => {
      try {
        return (await readdir(out)).filter((n) => n.endsWith('.out')).length >= 5;
      } catch {
        return false;
      }
    });
    assert.equal(first.code, 130);
    assert.ok(first.summary.interrupted);
    const second = await transform(args);
    assert.equal(first.summary.filesWritten + second.summary.filesWritten, 40);
    assert.equal(second.summary.filesSkipped, first.summary.filesWritten);
    assert.equal(
      first.summary.records + second.summary.records,
      41,
      'every input sent once (the broken one included)',
    );
    for (const rel of (await readdir(join(dir, 'out'), { recursive: true })).filter((n) =>
      n.endsWith('.out'),
    )) {
      assert.equal(await readFile(join(out, rel), 'utf8'), await readFile(join(dir, 'out', rel), 'utf8'));
    }
  });
});

describe('visionserve transform: JSON Lines (SplitType Line)', () => {
  let dir: string;
  let h: Harness;
  const N = 20_000;
  /** Lines of the input sent one request per record (interruption test). */
  const SMALL = 3000;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vs-transform-jl-'));
    await mkdir(join(dir, 'model', '1'), { recursive: true });
    await writeFile(join(dir, 'model', '1', 'model.onnx'), halfPlusTwoModel());
    await mkdir(join(dir, 'in'));
    const lines = Array.from({ length: N }, (_, i) => (i === 1234 ? '"not a number"' : `${(i % 1000) / 4}`));
    await writeFile(join(dir, 'in', 'data.jsonl'), lines.join('\n') + '\n');
    await mkdir(join(dir, 'small'));
    await writeFile(join(dir, 'small', 'data.jsonl'), lines.slice(0, SMALL).join('\n') + '\n');
    h = await startHarness({ modelBasePath: join(dir, 'model'), modelName: 'hp2', sagemakerPort: 0 });
  });
  after(async () => {
    await h.close();
  });

  const expected = (): string =>
    Array.from({ length: N }, (_, i) =>
      i === 1234 ? null : JSON.stringify({ predictions: [((i % 1000) / 4) * 0.5 + 2] }),
    )
      .map((l) => l ?? '')
      .join('\n');

  it("MultiRecord: line i of the output is record i's answer; the bad record is isolated, listed and kept in place", async () => {
    const out = join(dir, 'out');
    const r = await transform([
      `--input=${join(dir, 'in')}`,
      `--output=${out}`,
      `--model_base_path=${join(dir, 'model')}`,
      '--split-type=Line',
      '--assemble-with=Line',
      '--batch-strategy=MultiRecord',
      '--max-payload-mb=1',
    ]);
    assert.equal(r.code, 1);
    assert.deepEqual([r.summary.records, r.summary.recordsFailed], [N, 1]);
    const lines = (await readFile(join(out, 'data.jsonl.out'), 'utf8')).split('\n');
    assert.equal(lines.length, N + 1);
    assert.equal(lines[N], '');
    assert.match(lines[1234]!, /^\{"error":".*"\}$/);
    const want = expected().split('\n');
    for (let i = 0; i < N; i++) if (i !== 1234) assert.equal(lines[i], want[i], `line ${i}`);
    const manifest = JSON.parse((await readFile(join(out, 'transform-failures.jsonl'), 'utf8')).trim()) as {
      line: number;
      record: number;
    };
    assert.deepEqual([manifest.line, manifest.record], [1235, 1234]);
    // Per-record /invocations answers agree with the output lines.
    for (const i of [0, 1, 999, 19_999]) {
      const single = await request(`${h.sagemaker}/invocations`, {
        body: `${(i % 1000) / 4}`,
        headers: { 'Content-Type': 'application/jsonlines', Accept: 'application/jsonlines' },
      });
      assert.equal(lines[i], single.text);
    }
  });

  it('SingleRecord against the endpoint, interrupted mid-file and resumed from the checkpoint: no record twice, none lost', async () => {
    const out = join(dir, 'out-resume');
    const args = [
      `--input=${join(dir, 'small')}`,
      `--output=${out}`,
      `--endpoint=${h.sagemaker}`,
      '--split-type=Line',
      '--assemble-with=Line',
      '--batch-strategy=SingleRecord',
      '--max-concurrent-transforms=4',
    ];
    const checkpoint = join(out, '.transform-state', 'data.jsonl.out.checkpoint');
    const first = await interruptWhen(args, async () => {
      try {
        return (JSON.parse(await readFile(checkpoint, 'utf8')) as { records: number }).records > 300;
      } catch {
        return false;
      }
    });
    assert.equal(first.code, 130);
    assert.ok(first.summary.records > 0 && first.summary.records < SMALL, String(first.summary.records));
    const second = await transform(args);
    assert.equal(second.summary.recordsResumed, first.summary.records);
    assert.equal(first.summary.records + second.summary.records, SMALL);
    const lines = (await readFile(join(out, 'data.jsonl.out'), 'utf8')).split('\n');
    assert.equal(lines.length, SMALL + 1);
    const want = expected().split('\n');
    for (let i = 0; i < SMALL; i++) if (i !== 1234) assert.equal(lines[i], want[i], `line ${i}`);
  });
});
