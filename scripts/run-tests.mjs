#!/usr/bin/env node
// Runs every compiled test file with node's test runner, then the Python compatibility suite,
// h2spec against the gRPC port (compat/h2spec), the peers benchmark's report tests, then the deploy/ manifest validation (Go, deploy/validate/run.sh).
// Usage: node scripts/run-tests.mjs [--only-node | --only-deploy | --unit] [--list] [filter]
// --list: print the test files the other options select, and run nothing.
// --unit (npm run test:unit): only the test files that open no socket and start no server or
// process (told from their compiled text and that of the test helpers they import), two per
// core at a time: the fast loop while editing.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, dirname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// Every process the tests start runs with the malloc settings, as `visionserve serve` runs
// itself: a server the tests spawn is then that process, not a launcher's child
// (packages/cli/src/malloc-tuning.ts). Built by `npm test` before this runs.
const tuning = join(root, 'packages', 'cli', 'dist', 'src', 'malloc-tuning.js');
if (existsSync(tuning)) (await import(tuning)).tuneEnvironment();
const args = process.argv.slice(2);
const onlyNode = args.includes('--only-node');
const onlyDeploy = args.includes('--only-deploy');
const unitOnly = args.includes('--unit');

/** deploy/validate/run.sh: every Kubernetes/KServe manifest against the real API types. */
function runDeployValidation() {
  const go = spawnSync('bash', [join(root, 'deploy', 'validate', 'run.sh')], { stdio: 'inherit', cwd: root });
  return go.status ?? 1;
}
if (onlyDeploy) process.exit(runDeployValidation());
const filter = args.find((a) => !a.startsWith('--'));

/**
 * The compiled test files under `dir` (a package's dist/test) whose source (test/<same>.ts)
 * still exists: tsc -b leaves the output of a moved or deleted test behind.
 */
function walk(dir, out, source = join(dir, '..', '..', 'test')) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out, join(source, name));
    else if (name.endsWith('.test.js') && existsSync(join(source, name.replace(/\.js$/, '.ts')))) out.push(p);
  }
  return out;
}

const files = [];
for (const pkg of ['h2', 'protocol', 'vision', 'client', 'server', 'cli'])
  walk(join(root, 'packages', pkg, 'dist', 'test'), files);
/** What makes a test file more than a unit test: sockets, servers, child processes. */
const NOT_UNIT =
  /from 'node:(net|http|http2|https|tls|child_process|dgram)'|startVisionServer|startServer|startGrpcServer|startHttpServer|\bspawn\(|\bfork\(/;
const reachesNotUnit = new Map();
/**
 * Whether `file` or a test helper it imports by relative path (one under a dist/test folder,
 * e.g. the CLI's helpers/server-harness.js, which starts the server) opens a socket or a process.
 * The package code a test imports is not followed: importing a frontend opens nothing.
 */
function notUnit(file) {
  if (reachesNotUnit.has(file)) return reachesNotUnit.get(file);
  reachesNotUnit.set(file, false); // an import cycle among helpers adds nothing
  const text = readFileSync(file, 'utf8');
  const helpers = [...text.matchAll(/from '(\.\.?\/[^']+\.js)'/g)]
    .map((m) => join(dirname(file), m[1]))
    .filter((p) => p.includes(`${sep}dist${sep}test${sep}`) && existsSync(p));
  const result = NOT_UNIT.test(text) || helpers.some(notUnit);
  reachesNotUnit.set(file, result);
  return result;
}
/**
 * Unit test files run two per core: many wait on timers and worker threads, so on the 2-core
 * box 4 at a time took 59-69 s where 2 took 82-85 s (load average 10-14 from other builds).
 */
const UNIT_CONCURRENCY = 2 * availableParallelism();
const isUnit = (file) => !/\.(integration|e2e)\./.test(file) && !notUnit(file);
const selected = (filter ? files.filter((f) => f.includes(filter)) : files).filter(
  (f) => !unitOnly || isUnit(f),
);
if (selected.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
if (args.includes('--list')) {
  for (const file of selected) console.log(file);
  process.exit(0);
}
const node = spawnSync(
  process.execPath,
  ['--test', '--test-reporter=spec', `--test-concurrency=${unitOnly ? UNIT_CONCURRENCY : 1}`, ...selected],
  {
    stdio: 'inherit',
    cwd: root,
  },
);
let status = node.status ?? 1;
if (!onlyNode && !unitOnly && !filter) {
  const py = spawnSync('bash', [join(root, 'compat', 'run.sh')], { stdio: 'inherit', cwd: root });
  if ((py.status ?? 1) !== 0) status = py.status ?? 1;
  // h2spec, the HTTP/2 conformance tester, against the gRPC port (Go builds it on first use).
  const h2 = spawnSync(process.execPath, [join(root, 'compat', 'h2spec', 'run.mjs')], {
    stdio: 'inherit',
    cwd: root,
  });
  if ((h2.status ?? 1) !== 0) status = h2.status ?? 1;
  // The peers benchmark's report (standard library only; the benchmark itself runs on demand).
  const peers = spawnSync(
    'python3',
    ['-m', 'unittest', 'discover', '-s', join(root, 'bench', 'peers'), '-p', 'test_*.py'],
    {
      stdio: 'inherit',
      cwd: root,
    },
  );
  if ((peers.status ?? 1) !== 0) status = peers.status ?? 1;
  const deploy = runDeployValidation();
  if (deploy !== 0) status = deploy;
}
process.exit(status);
