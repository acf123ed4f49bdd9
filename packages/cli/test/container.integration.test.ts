/**
 * The container image as SageMaker runs it: build it (podman, stand-in base image built by
 * the project's scripts when missing), run `IMAGE serve` with /opt/ml/model mounted read-only,
 * /ping and /invocations with cat_tabby.jpg, the seed layout (handler + code/package.json
 * installed in the container), the demo with no model, and SIGTERM stopping it cleanly.
 * Cold on a fresh machine this takes minutes (apt, debootstrap, image build); warm, seconds.
 * Skipped, with the reason, only where it cannot run: VISIONSERVE_SKIP_CONTAINER_TEST=1, not
 * Linux, or podman/runc/debootstrap missing where they cannot be installed (not root, no apt-get).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import { request } from './helpers/sagemaker-models.js';
import { writeSeedModel } from './helpers/seed-model.js';
import { image, sharedModel } from './helpers/shared.js';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const IMAGE = 'localhost/visionserve:test';
const BASE_IMAGE = 'docker.io/library/node:20-bookworm-slim';

/** Why this machine cannot run the test, or undefined when it can (installing what is missing). */
function cannotRun(): string | undefined {
  if (process.env['VISIONSERVE_SKIP_CONTAINER_TEST'] === '1') return 'VISIONSERVE_SKIP_CONTAINER_TEST=1';
  if (process.platform !== 'linux') return `needs Linux with podman; this is ${process.platform}`;
  const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
  const root = process.getuid?.() === 0;
  const missing = ['podman', 'runc', 'debootstrap'].filter((t) => !has(t));
  if (missing.length > 0 && !root) {
    return `${missing.join(', ')} missing and not root to install them (run scripts/container/install-podman.sh as root)`;
  }
  if (missing.length > 0 && !has('apt-get')) {
    return `${missing.join(', ')} missing and no apt-get to install them (install podman, runc and debootstrap)`;
  }
  const baseThere = missing.length === 0 && spawnSync('podman', ['image', 'exists', BASE_IMAGE]).status === 0;
  if (!root && !baseThere && process.env['SKIP_BASE_IMAGE'] !== '1') {
    return `${BASE_IMAGE} missing and not root to build its stand-in (debootstrap); pull it and set SKIP_BASE_IMAGE=1`;
  }
  return undefined;
}
const SKIP = cannotRun();
if (SKIP !== undefined) process.stderr.write(`container test: SKIPPED: ${SKIP}\n`);
/** The flags podman needs on these machines (runc; rlimits the sandbox can grant). */
const RUN_FLAGS = ['--runtime', 'runc', '--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1000:1000'];

function note(text: string): void {
  process.stderr.write(`container test: ${text}\n`);
}

async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  const out = await fn();
  note(`${what}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return out;
}

/** The host CA bundle for npm inside the container, when egress TLS is intercepted (as on these machines). */
async function hostCaFlags(): Promise<string[]> {
  try {
    const extra = (await readdir('/usr/local/share/ca-certificates')).some((f) => f.endsWith('.crt'));
    if (!extra) return [];
  } catch {
    return [];
  }
  return [
    '-v',
    '/etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro',
    '-e',
    'NODE_EXTRA_CA_CERTS=/run/host-ca.crt',
  ];
}

interface Running {
  readonly name: string;
  readonly port: (containerPort: number) => Promise<number>;
}

const started: string[] = [];

async function runContainer(name: string, args: readonly string[]): Promise<Running> {
  await exec('podman', ['rm', '-f', name]).catch(() => undefined);
  await exec('podman', [
    'run',
    '-d',
    '--name',
    name,
    ...RUN_FLAGS,
    '-p',
    '127.0.0.1::8080',
    '-p',
    '127.0.0.1::8501',
    ...args,
    IMAGE,
    'serve',
  ]);
  started.push(name);
  return {
    name,
    port: async (containerPort) => {
      const { stdout } = await exec('podman', ['port', name, `${containerPort}/tcp`]);
      return Number(/:(\d+)\s*$/.exec(stdout.trim())![1]);
    },
  };
}

/** Polls until `fn` gives a value or the time is up; returns it and the milliseconds it took. */
async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch {
      // not up yet
    }
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function logs(name: string): Promise<string> {
  const { stdout, stderr } = await exec('podman', ['logs', name]).catch(() => ({ stdout: '', stderr: '' }));
  return stdout + stderr;
}

/** SIGTERM via `podman stop`: the server drains and exits 0 well before podman's SIGKILL. */
async function stopCleanly(name: string): Promise<void> {
  const t0 = Date.now();
  await exec('podman', ['stop', '-t', '20', name]);
  const ms = Date.now() - t0;
  const { stdout } = await exec('podman', ['inspect', '--format', '{{.State.ExitCode}}', name]);
  const text = await logs(name);
  assert.equal(stdout.trim(), '0', `exit code after SIGTERM\n${text}`);
  assert.match(text, /"msg":"shutting down","signal":"SIGTERM"/);
  // The image's glibc (Debian bookworm: 2.36) took its malloc settings for large tensors.
  assert.match(
    text,
    /"msg":"visionserve ready".*"malloc":"glibc 2\.\d+ with MALLOC_MMAP_THRESHOLD_=134217728 MALLOC_TRIM_THRESHOLD_=268435456"/,
  );
  note(`${name}: SIGTERM -> exit 0 in ${(ms / 1000).toFixed(1)} s`);
}

describe('container image (podman)', { skip: SKIP ?? false }, () => {
  let work: string;
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'vs-container-'));
    await timed('install podman (scripts/container/install-podman.sh)', () =>
      exec('bash', [join(ROOT, 'scripts/container/install-podman.sh')], { maxBuffer: 64 << 20 }),
    );
    await timed('base image + image build (scripts/container/build-image.sh)', async () => {
      try {
        await exec('bash', [join(ROOT, 'scripts/container/build-image.sh'), IMAGE], { maxBuffer: 256 << 20 });
      } catch (error) {
        const e = error as { stderr?: string; stdout?: string };
        assert.fail(
          `image build failed:\n${(e.stdout ?? '').slice(-3000)}\n${(e.stderr ?? '').slice(-5000)}`,
        );
      }
    });
    const { stdout } = await exec('podman', ['image', 'inspect', '--format', '{{.Size}}', IMAGE]);
    note(`image size: ${Math.round(Number(stdout.trim()) / 1e6)} MB`);
  });
  after(async () => {
    for (const name of started) await exec('podman', ['rm', '-f', name]).catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  });

  it('serve with /opt/ml/model mounted: /ping 200, /invocations cat_tabby.jpg -> 281, SIGTERM exits 0', async () => {
    const model = join(work, 'mobilenet');
    await mkdir(join(model, '1'), { recursive: true });
    await copyFile(sharedModel('mobilenetv2-12-int8.onnx'), join(model, '1', 'model.onnx'));
    await copyFile(sharedModel('imagenet_synset.txt'), join(model, 'imagenet_synset.txt'));
    await writeFile(join(model, 'visionserve.json'), JSON.stringify(MOBILENET_V2_VISION_CONFIG));
    const t0 = Date.now();
    const c = await runContainer('vs-test-mobilenet', ['-v', `${model}:/opt/ml/model:ro`]);
    const port = await c.port(8080);
    const url = `http://127.0.0.1:${port}`;
    await until(
      '/ping 200',
      async () => ((await request(`${url}/ping`)).status === 200 ? true : undefined),
      60_000,
    );
    const pingMs = Date.now() - t0;
    const res = await request(`${url}/invocations`, {
      body: image('cat_tabby.jpg'),
      headers: { 'Content-Type': 'application/x-image' },
    });
    const invokeMs = Date.now() - t0;
    assert.equal(res.status, 200, res.text);
    const top = (res.json() as { predictions: { class_id: number; label: string }[][] }).predictions[0]![0]!;
    assert.deepEqual([top.class_id, top.label], [281, 'tabby, tabby cat']);
    note(`cold start: run -> /ping 200 in ${pingMs} ms, -> first /invocations 200 in ${invokeMs} ms`);
    assert.deepEqual((await request(`${url}/ping`)).json(), {
      status: 'AVAILABLE',
      model: 'model',
      version: '1',
    });
    await stopCleanly(c.name);
  });

  it('the seed layout: code/package.json installed at start-up, the handler imports its dependency', async () => {
    const seed = await writeSeedModel(join(work, 'seed'));
    const t0 = Date.now();
    const c = await runContainer('vs-test-seed', [
      '-v',
      `${seed}:/opt/ml/model:ro`,
      ...(await hostCaFlags()),
    ]);
    const url = `http://127.0.0.1:${await c.port(8080)}`;
    await until(
      '/ping 200 after npm install',
      async () => ((await request(`${url}/ping`)).status === 200 ? true : undefined),
      180_000,
    ).catch(async (error: unknown) => {
      note(await logs(c.name));
      throw error;
    });
    note(`seed layout: run -> /ping 200 (npm install included) in ${Date.now() - t0} ms`);
    const res = await request(`${url}/invocations`, {
      body: image('cat_tabby.jpg'),
      headers: { 'Content-Type': 'image/jpeg' },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      [(res.json() as { class_id: number }).class_id, (res.json() as { decoder: string }).decoder],
      [281, 'jpeg-js'],
    );
    assert.match(await logs(c.name), /handler code copied out of a read-only model directory/);
    await stopCleanly(c.name);
  });

  it('with no model: serves the demo (half_plus_two), the web console and the docs UI', async () => {
    const c = await runContainer('vs-test-demo', []);
    const rest = `http://127.0.0.1:${await c.port(8501)}`;
    const sm = `http://127.0.0.1:${await c.port(8080)}`;
    await until(
      '/ping 200',
      async () => ((await request(`${sm}/ping`)).status === 200 ? true : undefined),
      60_000,
    );
    const res = await request(`${rest}/v1/models/half_plus_two:predict`, {
      body: '{"instances": [1.0, 2.0, 5.0]}',
    });
    assert.deepEqual(res.json(), { predictions: [2.5, 3, 4.5] });
    const inv = await request(`${sm}/invocations`, {
      body: '{"instances": [1.0]}',
      headers: { 'Content-Type': 'application/json' },
    });
    assert.deepEqual(inv.json(), { predictions: [2.5] });
    // The image carries the built web console and the docs UI (no CDN).
    const page = await request(`${rest}/console/`);
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /<html/i);
    assert.equal((await request(`${rest}/docs/`)).status, 200);
    await stopCleanly(c.name);
  });
});
