/**
 * glibc malloc settings for large tensors (src/malloc-tuning.ts): the environment helpers, and
 * the benchmark running itself again with the settings so that its floors (in its own process)
 * and the servers it starts share them, and saying so in its results.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  MALLOC_TUNING,
  describeMallocTuning,
  wantsMallocTuning,
  withMallocTuning,
} from '../src/malloc-tuning.js';

const BIN = fileURLToPath(new URL('../../bin/visionserve.js', import.meta.url));

describe('malloc tuning', () => {
  it('adds the settings the environment lacks; values the user set win; VISIONSERVE_MALLOC_TUNING=0 adds none', () => {
    const base = { PATH: '/bin' };
    const tuned = withMallocTuning(base);
    assert.equal(tuned['MALLOC_MMAP_THRESHOLD_'], String(1024 ** 3));
    assert.equal(tuned['MALLOC_TRIM_THRESHOLD_'], String(256 * 1024 ** 2));
    assert.equal(tuned['PATH'], '/bin');
    assert.deepEqual(
      withMallocTuning({ ...base, MALLOC_TRIM_THRESHOLD_: '1' })['MALLOC_TRIM_THRESHOLD_'],
      '1',
    );
    assert.deepEqual(withMallocTuning({ ...base, VISIONSERVE_MALLOC_TUNING: '0' }), {
      ...base,
      VISIONSERVE_MALLOC_TUNING: '0',
    });
    if (process.platform === 'linux') {
      assert.equal(wantsMallocTuning(base), true);
      assert.equal(wantsMallocTuning({ ...base, MALLOC_MMAP_THRESHOLD_: '1' }), true);
    }
    assert.equal(wantsMallocTuning(tuned), false);
    assert.equal(wantsMallocTuning({ ...base, VISIONSERVE_MALLOC_TUNING: '0' }), false);
    assert.match(describeMallocTuning(base), /glibc defaults/);
    assert.equal(
      describeMallocTuning(tuned),
      Object.entries(MALLOC_TUNING)
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
    );
  });

  it('`visionserve bench` runs itself again with the settings and reports them; with VISIONSERVE_MALLOC_TUNING=0 it runs on the defaults', () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !(name in MALLOC_TUNING)));
    for (const [disable, expect] of [
      [false, describeMallocTuning(withMallocTuning({}))],
      [true, describeMallocTuning({})],
    ] as const) {
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
          {
            env: disable ? { ...env, VISIONSERVE_MALLOC_TUNING: '0' } : env,
            encoding: 'utf8',
            timeout: 120_000,
          },
        );
        assert.equal(run.status, 0, run.stderr);
        const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as {
          meta: { malloc: string };
        };
        assert.equal(results.meta.malloc, expect);
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
