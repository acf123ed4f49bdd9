#!/usr/bin/env node
// Fails when the committed generated protobuf code (src/gen of packages/protocol)
// differs from what `npm run gen:proto` would write now: for each package, buf generates
// into a scratch directory (`buf generate -o`, the package's own buf.yaml and buf.gen.yaml,
// protoc-gen-es from the workspace's node_modules) and the two trees are compared file by file.
// Run by `npm run lint`; needs the npm cache or the registry for @bufbuild/buf.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Same version as package.json's gen:proto. */
const BUF = '@bufbuild/buf@1.74.0';
const PACKAGES = ['packages/protocol'];

/** Relative paths of the files under `dir` (empty when it does not exist). */
function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  if (existsSync(dir)) walk(dir);
  return out.sort();
}

/** Differences between the committed tree and the regenerated one, as lines. */
function compare(committed, regenerated, label) {
  const a = new Set(files(committed));
  const b = new Set(files(regenerated));
  const problems = [];
  for (const f of b) if (!a.has(f)) problems.push(`${label}/${f}: generated but not committed`);
  for (const f of a) {
    if (!b.has(f)) problems.push(`${label}/${f}: committed but not generated (stale?)`);
    else if (!readFileSync(join(committed, f)).equals(readFileSync(join(regenerated, f))))
      problems.push(`${label}/${f}: differs from the regenerated file`);
  }
  return problems;
}

const env = {
  ...process.env,
  PATH: `${join(root, 'node_modules', '.bin')}${delimiter}${process.env.PATH ?? ''}`,
};

/** Runs buf generate for one package into `out`; resolves with its stderr on failure, undefined on success. */
function generate(pkg, out) {
  return new Promise((resolve) => {
    const child = spawn('npx', ['--yes', BUF, 'generate', '-o', out], {
      cwd: join(root, pkg),
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', (error) => resolve(String(error)));
    child.on('close', (code) => resolve(code === 0 ? undefined : stderr || `exit code ${code}`));
  });
}

const scratch = mkdtempSync(join(tmpdir(), 'visionserve-check-generated-'));
const problems = [];
try {
  // Both packages at once: most of the time is npx start-up and protoc-gen-es processes.
  const outs = PACKAGES.map((pkg) => join(scratch, pkg.replaceAll('/', '_')));
  const failures = await Promise.all(PACKAGES.map((pkg, i) => generate(pkg, outs[i])));
  PACKAGES.forEach((pkg, i) => {
    if (failures[i] !== undefined) {
      console.error(`check-generated: buf generate failed in ${pkg}:\n${failures[i]}`);
      process.exitCode = 1;
    } else
      problems.push(...compare(join(root, pkg, 'src', 'gen'), join(outs[i], 'src', 'gen'), `${pkg}/src/gen`));
  });
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
if (problems.length > 0) {
  console.error(`check-generated: generated protobuf code is out of date (run \`npm run gen:proto\`):`);
  for (const p of problems) console.error(`  ${p}`);
  process.exitCode = 1;
} else if (process.exitCode !== 1) {
  console.log(`check-generated: src/gen of ${PACKAGES.join(', ')} match their .proto files`);
}
