/**
 * A first contact without surprises: what a new user sees (exit code and message) from
 * `visionserve serve` for the usual first mistakes, quoted as they appear.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { image, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { CLI, startServerProcess } from './helpers/server-process.js';

const run = promisify(execFile);

/** Runs `visionserve serve ...` to its end; the server must refuse to start. */
async function serveFails(flags: readonly string[]): Promise<{ code: number; output: string; ms: number }> {
  const started = Date.now();
  try {
    await run(
      process.execPath,
      [CLI, 'serve', '--host=127.0.0.1', '--port=0', '--rest_api_port=0', '--sagemaker_port=-1', ...flags],
      { encoding: 'utf8', timeout: 60_000 },
    );
    return { code: 0, output: '', ms: Date.now() - started };
  } catch (error) {
    const e = error as { code?: number; signal?: string | null; stdout?: string; stderr?: string };
    return {
      // A signal (a crash) shows as -1 with the signal's name at the top of the output.
      code: typeof e.code === 'number' ? e.code : -1,
      output: `${typeof e.code === 'number' ? '' : `[code ${String(e.code)}, signal ${String(e.signal)}]\n`}${e.stdout ?? ''}${e.stderr ?? ''}`,
      ms: Date.now() - started,
    };
  }
}

/** The lines a user reads: the JSON log lines left out. */
const said = (output: string): string =>
  output
    .split('\n')
    .filter((l) => l.length > 0 && !l.startsWith('{'))
    .join('\n');

describe('first contact: what `visionserve serve` says', () => {
  let root: string;
  before(async () => {
    root = await tempRepo('vs-first-');
  });

  it('a mistyped --model_base_path: exit 2 at once, naming the flag and the way to wait', async () => {
    const r = await serveFails([`--model_base_path=${root}/mobilenett`]);
    assert.equal(r.code, 2);
    assert.equal(
      said(r.output),
      `visionserve: --model_base_path: ${root}/mobilenett does not exist\n` +
        '(start anyway and wait for versions to appear with --wait_for_models)\n' +
        '(visionserve serve --help lists the flags)',
    );
    assert.doesNotMatch(r.output, /visionserve ready|Loading servable/);
  });

  it('a folder holding model.onnx directly: says where the file must go', async () => {
    await mkdir(join(root, 'flat'));
    await writeFile(join(root, 'flat', 'model.onnx'), halfPlusTwoModel());
    const r = await serveFails([`--model_base_path=${root}/flat`]);
    assert.equal(r.code, 2);
    assert.match(
      said(r.output),
      new RegExp(
        `^visionserve: --model_base_path: ${root}/flat holds model.onnx directly; versions live in numbered directories: move it to ${root}/flat/1/model.onnx\n`,
      ),
    );
  });

  it('a path to a single .onnx file is served as version 1', async () => {
    const file = join(root, 'half_plus_two.onnx');
    await writeFile(file, halfPlusTwoModel());
    const server = await startServerProcess(['--model_name=half', `--model_base_path=${file}`]);
    try {
      assert.match(server.output(), /serving a single model file as version 1/);
      const res = await fetch(`http://127.0.0.1:${server.ports.rest!}/v1/models/half:predict`, {
        method: 'POST',
        body: '{"instances": [1.0, 2.0, 5.0]}',
      });
      assert.deepEqual(await res.json(), { predictions: [2.5, 3, 4.5] });
    } finally {
      server.child.kill('SIGTERM');
      assert.equal((await server.exited).code, 0);
    }
  });

  describe('a port already in use', () => {
    let blocker: Server;
    let port: number;
    before(async () => {
      blocker = createServer();
      await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
      port = (blocker.address() as { port: number }).port;
    });
    after(() => {
      blocker.close();
    });

    it('is reported naming the flag, before any model loads', async () => {
      await placeModel(root, 'mnist', 1, sharedModel('mnist-8.onnx'));
      for (const flag of ['--port', '--rest_api_port']) {
        const r = await serveFails([`--model_base_path=${root}/mnist`, `${flag}=${port}`]);
        assert.equal(r.code, 2, r.output);
        assert.match(
          said(r.output),
          new RegExp(`^visionserve: ${flag}=${port}: the port is already in use\n`),
        );
        assert.doesNotMatch(r.output, /Loading servable/, 'ports are bound before models load');
      }
    });
  });

  it('an unknown flag suggests the one meant', async () => {
    for (const [typo, meant] of [
      ['--instances=2', '--model_instances'],
      ['--rest_port=8501', '--rest_api_port'],
      ['--grpc_port=8500', '--port'],
      ['--enable_batch', '--enable_batching'],
    ] as const) {
      const r = await serveFails([typo]);
      assert.equal(r.code, 2);
      const name = typo.split('=', 1)[0]!;
      assert.equal(
        said(r.output),
        `visionserve: unknown flag ${name} (did you mean ${meant}?)\n(visionserve serve --help lists the flags)`,
      );
    }
  });

  it('a model that does not load: TF Serving refuses to start, --wait_for_models starts anyway', async () => {
    await placeModel(root, 'broken', 1, new TextEncoder().encode('not an onnx model'));
    const r = await serveFails([`--model_name=broken`, `--model_base_path=${root}/broken`]);
    assert.equal(r.code, 2);
    assert.match(
      said(r.output),
      /^visionserve: 1 model\(s\) did not become available: \{\{\{name: broken version: 1\} due to error: .*Protobuf parsing failed.*\}, \} \(--wait_for_models starts anyway and keeps retrying\)\n/,
    );
    const server = await startServerProcess([
      '--model_name=broken',
      `--model_base_path=${root}/broken`,
      '--wait_for_models',
    ]);
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);
  });

  it('base64 JPEG sent to a float model: says where images go', async () => {
    const base = join(root, 'mobilenet');
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    await copyFile(sharedModel('imagenet_synset.txt'), join(base, 'imagenet_synset.txt'));
    const server = await startServerProcess(['--model_name=mobilenet', `--model_base_path=${base}`]);
    try {
      const b64 = image('cat_tabby.jpg').toString('base64');
      const res = await fetch(`http://127.0.0.1:${server.ports.rest!}/v1/models/mobilenet:predict`, {
        method: 'POST',
        body: JSON.stringify({ instances: [{ b64 }] }),
      });
      assert.equal(res.status, 400);
      const { error } = (await res.json()) as { error: string };
      assert.match(error, /not formatted correctly for type: float/);
      assert.match(error, /post its bytes to \/invocations with Content-Type: image\/jpeg/);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });
});
