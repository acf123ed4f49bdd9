import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { stat, utimes } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { CLI, startServerProcess } from './helpers/server-process.js';
import { REPO_ROOT } from './helpers/shared.js';

const SERVER = join(REPO_ROOT, 'packages', 'server');

/** REST predict on the generated demo model (half_plus_two: y = 0.5 x + 2). */
async function halfPlusTwo(restPort: number): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${restPort}/v1/models/half_plus_two:predict`, {
    method: 'POST',
    body: JSON.stringify({ instances: [1, 2, 5] }),
  });
  return res.json();
}

async function serveAndPredict(env: Readonly<Record<string, string>> = {}): Promise<boolean> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  const server = await startServerProcess(['--log_level=debug']).finally(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) Reflect.deleteProperty(process.env, k);
      else process.env[k] = v;
    }
  });
  try {
    assert.deepEqual(await halfPlusTwo(server.ports.rest!), { predictions: [2.5, 3, 4.5] });
    const line = server
      .output()
      .split('\n')
      .find((l) => l.includes('"loading the server"'));
    assert.ok(line, server.output());
    return (JSON.parse(line) as { bundled: boolean }).bundled;
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }
}

describe('visionserve serve from the server bundle (packages/server/scripts/bundle.mjs)', () => {
  before(() => {
    // `npm run build` writes it; a test run after `tsc -b` alone finds it stale or missing.
    const built = spawnSync(process.execPath, [join(SERVER, 'scripts', 'bundle.mjs')], { encoding: 'utf8' });
    assert.equal(built.status, 0, built.stderr);
  });

  it('serves from the fresh bundle; VISIONSERVE_SERVER_BUNDLE=0 loads the modules', async () => {
    assert.equal(await serveAndPredict(), true);
    assert.equal(await serveAndPredict({ VISIONSERVE_SERVER_BUNDLE: '0' }), false);
  });

  it('falls back to the modules when a compiled package is newer than the bundle', async () => {
    const info = join(SERVER, 'dist', 'tsconfig.tsbuildinfo');
    const before = await stat(info);
    const later = new Date(Date.now() + 60_000);
    await utimes(info, later, later);
    try {
      assert.equal(await serveAndPredict(), false);
    } finally {
      await utimes(info, before.atime, before.mtime);
    }
  });

  it('a configuration error from the bundled server exits 2 with its message', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const child = spawn(
        process.execPath,
        [CLI, 'serve', '--host=127.0.0.1', '--port=0', `--rest_api_port=${port}`, '--sagemaker_port=-1'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let err = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      assert.equal(code, 2, err);
      assert.match(err, /--rest_api_port/);
    } finally {
      taken.close();
    }
  });
});
