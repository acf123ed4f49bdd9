/**
 * The client installs without native dependencies: copy the built client and the workspace
 * packages it declares, transitively (h2, protocol, vision), into an empty directory whose
 * node_modules holds only their declared npm dependencies (symlinked from the workspace,
 * transitively), then import the client in a
 * child process with NODE_PATH unset. onnxruntime-node and sharp must not be resolvable
 * there, the main entry must import, the gRPC codec must load on first use, and the image
 * helper must fail with FAILED_PRECONDITION (sharp missing) instead of at import time.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, '.ci'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('repository root not found');
    dir = parent;
  }
  return dir;
})();

interface PackageJson {
  name: string;
  dependencies?: Record<string, string>;
  gypfile?: boolean;
  scripts?: Record<string, string>;
}

const readPackage = (dir: string): PackageJson =>
  JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson;

describe('@visionserve/client in an isolated install (no native modules)', () => {
  let dir: string;
  const linked: string[] = [];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'vs-client-install-'));
    const modules = join(dir, 'node_modules');
    const workspace = ['client'];
    for (let i = 0; i < workspace.length; i++) {
      for (const name of Object.keys(readPackage(join(ROOT, 'packages', workspace[i]!)).dependencies ?? {})) {
        const pkg = name.startsWith('@visionserve/') ? name.slice('@visionserve/'.length) : undefined;
        if (pkg !== undefined && !workspace.includes(pkg)) workspace.push(pkg);
      }
    }
    assert.deepEqual([...workspace].sort(), ['client', 'h2', 'protocol', 'vision']);
    for (const pkg of workspace) {
      const target = join(modules, '@visionserve', pkg);
      mkdirSync(target, { recursive: true });
      cpSync(join(ROOT, 'packages', pkg, 'package.json'), join(target, 'package.json'));
      cpSync(join(ROOT, 'packages', pkg, 'dist', 'src'), join(target, 'dist', 'src'), { recursive: true });
    }
    // Declared dependencies, transitively, from the workspace's node_modules.
    const queue = workspace.flatMap((p) =>
      Object.keys(readPackage(join(ROOT, 'packages', p)).dependencies ?? {}),
    );
    while (queue.length > 0) {
      const name = queue.shift()!;
      if (name.startsWith('@visionserve/') || linked.includes(name)) continue;
      const source = realpathSync(join(ROOT, 'node_modules', name));
      const pkg = readPackage(source);
      assert.ok(
        pkg.gypfile !== true && !existsSync(join(source, 'binding.gyp')),
        `${name} is a native module`,
      );
      mkdirSync(dirname(join(modules, name)), { recursive: true });
      symlinkSync(source, join(modules, name), 'dir');
      linked.push(name);
      queue.push(...Object.keys(pkg.dependencies ?? {}));
    }
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'isolated', type: 'module', private: true }),
    );
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('imports fast, cannot see onnxruntime-node or sharp, and loads lazily what it needs', () => {
    writeFileSync(
      join(dir, 'check.mjs'),
      `
const canResolve = (name) => { try { import.meta.resolve(name); return true; } catch { return false; } };
const t0 = performance.now();
const client = await import('@visionserve/client');
const importMs = performance.now() - t0;
const t1 = performance.now();
const image = await import('@visionserve/client/image');
// A JPEG's leading bytes: they pass the format sniffing, so only the missing sharp can refuse them.
const imageImportMs = performance.now() - t1;
let imageError;
try { await image.imageToTensor(new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10])); } catch (e) { imageError = { name: e.name, code: e.code, message: e.message }; }
const grpc = client.createTfsGrpcClient({ address: '127.0.0.1:1' });
let grpcCode;
try { await grpc.getModelStatus('m', { timeoutMs: 5000 }); } catch (e) { grpcCode = e.code; }
grpc.close();
const t = client.tensor(new Float32Array([1, 2]), [1, 2]);
console.log(JSON.stringify({ importMs, imageImportMs, ort: canResolve('onnxruntime-node'), sharp: canResolve('sharp'),
  grpcJs: canResolve('@grpc/grpc-js'), imageError, grpcCode, nested: client.toNested(t), servingError: typeof client.ServingError }));
`,
    );
    const env = { ...process.env };
    delete env['NODE_PATH'];
    const out = execFileSync(process.execPath, ['check.mjs'], { cwd: dir, env, encoding: 'utf8' });
    const r = JSON.parse(out.trim().split('\n').at(-1)!) as {
      importMs: number;
      imageImportMs: number;
      ort: boolean;
      sharp: boolean;
      grpcJs: boolean;
      imageError: { name: string; code: number; message: string } | undefined;
      grpcCode: number | undefined;
      nested: unknown;
      servingError: string;
    };
    assert.equal(r.ort, false, 'onnxruntime-node must not be resolvable');
    assert.equal(r.sharp, false, 'sharp must not be resolvable');
    assert.equal(r.grpcJs, false, '@grpc/grpc-js is not a client dependency');
    assert.deepEqual(r.nested, [[1, 2]]);
    assert.equal(r.servingError, 'function');
    assert.equal(r.imageError?.name, 'ServingError');
    assert.equal(r.imageError.code, 9, 'FAILED_PRECONDITION');
    assert.match(r.imageError.message, /npm install sharp/);
    assert.equal(
      r.grpcCode,
      14,
      'UNAVAILABLE: the lazily loaded codec worked and the connection was refused',
    );
    assert.ok(r.importMs < 2000, `import took ${r.importMs} ms`);
    console.log(
      `isolated import of @visionserve/client: ${r.importMs.toFixed(1)} ms (image subpath ${r.imageImportMs.toFixed(1)} ms); linked deps: ${linked.join(', ')}`,
    );
  });
});
