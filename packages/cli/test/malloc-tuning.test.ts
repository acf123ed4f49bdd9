/**
 * glibc malloc settings for large tensors (src/malloc-tuning.ts): the environment helpers for
 * each glibc version, the launcher passing exit codes and signals through, and the benchmark
 * running itself again with the settings so that its floors (in its own process) and the
 * servers it starts share them, and saying so in its results.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  LARGE_ANSWER_V8_FLAGS,
  MALLOC_TUNING,
  describeMallocTuning,
  glibcTakesTuning,
  currentLibc,
  wantsMallocTuning,
  wantsV8Tuning,
  withMallocTuning,
  withoutLargeAnswerFlags,
} from '../src/malloc-tuning.js';

const BIN = fileURLToPath(new URL('../../bin/visionserve.js', import.meta.url));
const START = fileURLToPath(new URL('../../../../scripts/start.mjs', import.meta.url));
const MODULE = new URL('../src/malloc-tuning.js', import.meta.url).href;
const takes = glibcTakesTuning();
/** This environment without the settings. */
const bare = Object.fromEntries(Object.entries(process.env).filter(([name]) => !(name in MALLOC_TUNING)));

/** A process started by the test (in a process group of its own, as a terminal starts a command). */
interface Started {
  readonly p: ReturnType<typeof spawn>;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** Both output pipes closed: every process that held them (the server too) has exited. */
  readonly closed: Promise<void>;
  output(): string;
}

function start(args: readonly string[], env: NodeJS.ProcessEnv): Started {
  const p = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  p.stdout.on('data', (c: Buffer) => (out += c.toString()));
  p.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    p.on('exit', (code, signal) => {
      resolve({ code, signal });
    });
  });
  const closing = (stream: NodeJS.ReadableStream): Promise<void> =>
    new Promise((resolve) =>
      stream.once('close', () => {
        resolve();
      }),
    );
  const closed = Promise.all([closing(p.stdout), closing(p.stderr)]).then(() => undefined);
  return { p, exited, closed, output: () => out };
}

/** Waits for the "visionserve ready" line (stderr when not a terminal). */
async function readyLine(run: Started): Promise<{ malloc: string; pid: number }> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const line = run
      .output()
      .split('\n')
      .find((l) => l.includes('"visionserve ready"'));
    if (line !== undefined) return JSON.parse(line) as { malloc: string; pid: number };
    if (run.p.exitCode !== null || Date.now() > deadline) {
      run.p.kill('SIGKILL');
      throw new Error(`no ready line:\n${run.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Whether `promise` settles within `ms`. */
const within = (promise: Promise<unknown>, ms: number): Promise<boolean> =>
  Promise.race([
    promise.then(() => true),
    new Promise<boolean>((r) =>
      setTimeout(() => {
        r(false);
      }, ms),
    ),
  ]);

/** The pids of a process's children (Linux). */
function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
}

const SERVE_ARGS = ['serve', '--port=0', '--rest_api_port=0', '--sagemaker_port=-1', '--host=127.0.0.1'];

describe('malloc tuning', () => {
  it('adds the settings only on glibc 2.35 or newer, where the environment lacks them; values the user set win; VISIONSERVE_MALLOC_TUNING=0 adds none', () => {
    const base = { PATH: '/bin' };
    const tuned = withMallocTuning(base, { glibc: '2.36' });
    assert.equal(tuned['MALLOC_MMAP_THRESHOLD_'], String(128 * 1024 ** 2));
    assert.equal(tuned['MALLOC_TRIM_THRESHOLD_'], String(256 * 1024 ** 2));
    assert.equal(tuned['PATH'], '/bin');
    assert.equal(
      withMallocTuning({ ...base, MALLOC_TRIM_THRESHOLD_: '1' }, { glibc: '2.36' })['MALLOC_TRIM_THRESHOLD_'],
      '1',
    );
    assert.equal(wantsMallocTuning({ ...base, MALLOC_MMAP_THRESHOLD_: '1' }, { glibc: '2.36' }), true);
    assert.equal(wantsMallocTuning(tuned, { glibc: '2.36' }), false);
    for (const libc of [{ glibc: '2.34' }, { glibc: '2.31' }, {}]) {
      assert.deepEqual(withMallocTuning(base, libc), base, JSON.stringify(libc));
      assert.equal(wantsMallocTuning(base, libc), false);
    }
    assert.equal(wantsV8Tuning([]), true);
    assert.equal(wantsV8Tuning(['--initial-old-space-size=64']), false);
    assert.equal(wantsV8Tuning(['--initial_old_space_size=512']), false);
    assert.deepEqual(
      withoutLargeAnswerFlags(['--cpu-prof', '--initial_old_space_size=512', '--initial-old-space-size=256']),
      ['--cpu-prof'],
    );
    assert.equal(glibcTakesTuning({ glibc: '2.35' }), true);
    assert.equal(glibcTakesTuning({ glibc: '3.0' }), true);
    assert.deepEqual(withMallocTuning({ ...base, VISIONSERVE_MALLOC_TUNING: '0' }, { glibc: '2.36' }), {
      ...base,
      VISIONSERVE_MALLOC_TUNING: '0',
    });
    assert.match(describeMallocTuning(base, { glibc: '2.36' }), /glibc 2\.36 defaults/);
    assert.match(describeMallocTuning(base, {}), /not glibc/);
    assert.equal(
      describeMallocTuning(tuned, { glibc: '2.36' }),
      `glibc 2.36 with ${Object.entries(MALLOC_TUNING)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
  });

  it('the launcher runs its child with the settings (where they apply) and leaves with its exit code or signal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vs-malloc-launch-'));
    try {
      const child = join(dir, 'child.mjs');
      writeFileSync(
        child,
        `process.stdout.write(String(process.env.MALLOC_MMAP_THRESHOLD_));\n` +
          `if (process.argv[2] === 'signal') { process.kill(process.pid, 'SIGTERM'); setTimeout(() => {}, 5000); }\n` +
          `else process.exitCode = Number(process.argv[2]);\n`,
      );
      const launcher = join(dir, 'launcher.mjs');
      writeFileSync(
        launcher,
        `import { runWithMallocTuning } from ${JSON.stringify(MODULE)};\n` +
          `process.exitCode = await runWithMallocTuning([${JSON.stringify(child)}, ...process.argv.slice(2)]);\n`,
      );
      const run = (arg: string): Promise<{ code: number | null; signal: string | null; out: string }> =>
        new Promise((resolve) => {
          const p = spawn(process.execPath, [launcher, arg], { env: bare });
          let out = '';
          p.stdout.on('data', (c: Buffer) => (out += c.toString()));
          p.on('exit', (code, signal) => {
            resolve({ code, signal, out });
          });
        });
      const exit3 = await run('3');
      assert.equal(exit3.code, 3);
      assert.equal(exit3.out, takes ? MALLOC_TUNING['MALLOC_MMAP_THRESHOLD_'] : 'undefined');
      const killed = await run('signal');
      assert.equal(killed.signal, 'SIGTERM');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('`npm start` (scripts/start.mjs) serves with the settings where they apply, says so in the ready line, and stops gracefully on SIGTERM passed on to the server', async () => {
    const p = spawn(
      process.execPath,
      [START, '--port=0', '--rest_api_port=0', '--sagemaker_port=-1', '--host=127.0.0.1'],
      {
        env: bare,
      },
    );
    let out = '';
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      p.on('exit', (code, signal) => {
        resolve({ code, signal });
      });
    });
    try {
      const ready = await new Promise<{ malloc: string }>((resolve, reject) => {
        p.once('exit', () => {
          reject(new Error(`the launcher exited before ready:\n${out}`));
        });
        const timer = setTimeout(() => {
          reject(new Error(`no ready line in 60 s:\n${out}`));
        }, 60_000);
        // The log goes to stderr when stdout is not a terminal.
        const onData = (c: Buffer): void => {
          out += c.toString();
          const line = out.split('\n').find((l) => l.includes('"visionserve ready"'));
          if (line !== undefined) {
            clearTimeout(timer);
            resolve(JSON.parse(line) as { malloc: string });
          }
        };
        p.stdout.on('data', onData);
        p.stderr.on('data', onData);
      });
      p.stdout.removeAllListeners('data');
      p.stderr.removeAllListeners('data');
      p.stdout.on('data', (c: Buffer) => (out += c.toString()));
      p.stderr.on('data', (c: Buffer) => (out += c.toString()));
      assert.equal(ready.malloc, describeMallocTuning(withMallocTuning(bare), currentLibc()));
      if (takes)
        assert.match(ready.malloc, /MALLOC_MMAP_THRESHOLD_=134217728 MALLOC_TRIM_THRESHOLD_=268435456/);
    } catch (error) {
      p.kill('SIGTERM');
      throw error;
    }
    p.kill('SIGTERM');
    assert.deepEqual(await exited, { code: 0, signal: null });
    assert.match(out, /shutting down/);
  });

  it('`visionserve serve` without the settings serves as a child that has them: Ctrl-C passed on once stops it gracefully, and it stops by itself when its launcher is killed, also while starting', async () => {
    const run = start([BIN, ...SERVE_ARGS], bare);
    const ready = await readyLine(run);
    const children = childrenOf(run.p.pid!);
    try {
      assert.equal(ready.malloc, describeMallocTuning(withMallocTuning(bare), currentLibc()));
      // Where glibc takes the settings the server is the launcher's one child, else the process itself.
      assert.deepEqual(children, takes ? [ready.pid] : [], `children ${children.join(' ')}`);
    } catch (error) {
      process.kill(-run.p.pid!, 'SIGKILL');
      for (const pid of children) process.kill(pid, 'SIGKILL');
      throw error;
    }
    // Ctrl-C: the terminal signals the foreground process group (the launcher's, not the server's).
    process.kill(-run.p.pid!, 'SIGINT');
    assert.deepEqual(await run.exited, { code: 0, signal: null }, run.output());
    assert.equal(run.output().match(/"shutting down"/g)?.length, 1, run.output());
    assert.match(run.output(), /"signal":"SIGINT"/);
    if (!takes) return;
    // A launcher killed outright, after the ready line and while the server still starts: the
    // server notices its channel close and stops gracefully (its exit closes the pipes).
    for (const when of ['ready', 'starting'] as const) {
      const killed = start([BIN, ...SERVE_ARGS], bare);
      if (when === 'ready') await readyLine(killed);
      else {
        const until = Date.now() + 30_000;
        while (childrenOf(killed.p.pid!).length === 0 && Date.now() < until)
          await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const [server] = childrenOf(killed.p.pid!);
      killed.p.kill('SIGKILL');
      const stopped = await within(killed.closed, 30_000);
      if (!stopped && server !== undefined) process.kill(server, 'SIGKILL');
      assert.ok(
        stopped,
        `the server outlived its launcher (killed when ${when}) by 30 s:\n${killed.output()}`,
      );
      if (when === 'ready') assert.match(killed.output(), /"signal":"launcher exited"/);
    }
  });

  it('`visionserve bench` runs itself again with the settings (where they apply) and reports them; with VISIONSERVE_MALLOC_TUNING=0 it runs on the defaults', () => {
    for (const disable of [false, true]) {
      const env = disable ? { ...bare, VISIONSERVE_MALLOC_TUNING: '0' } : bare;
      const out = mkdtempSync(join(tmpdir(), 'vs-malloc-bench-'));
      try {
        const run = spawnSync(
          process.execPath,
          [
            BIN,
            'bench',
            '--suite',
            'latency',
            '--cases',
            'mobilenet',
            '--paths',
            'in-process',
            '--mode',
            'closed',
            '--duration-s',
            '0.2',
            '--warmup-s',
            '0',
            '--out',
            out,
          ],
          { env, encoding: 'utf8', timeout: 120_000 },
        );
        assert.equal(run.status, 0, run.stderr);
        const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as {
          meta: { malloc: string; nodeFlags: string[] };
        };
        assert.equal(results.meta.malloc, describeMallocTuning(withMallocTuning(env), currentLibc()));
        // The V8 flags for large answers come with the re-run whatever the malloc settings.
        for (const flag of LARGE_ANSWER_V8_FLAGS) assert.ok(results.meta.nodeFlags.includes(flag), flag);
        if (takes && !disable) assert.match(results.meta.malloc, /MALLOC_MMAP_THRESHOLD_=134217728/);
        assert.match(
          readFileSync(join(out, 'results.md'), 'utf8'),
          /Malloc \(this process and every one it started\)/,
        );
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    }
  });
});
