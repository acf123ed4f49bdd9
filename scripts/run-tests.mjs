#!/usr/bin/env node
// Runs every compiled test file with node's test runner, then the Python compatibility suite,
// h2spec against the gRPC port (compat/h2spec), the peers benchmark's report tests, then the deploy/ manifest validation (Go, deploy/validate/run.sh).
// Usage: node scripts/run-tests.mjs [--only-node | --only-deploy | --unit] [filter]
// --unit (npm run test:unit): only the test files that open no socket and start no server or
// process (told from their compiled imports), two at a time: the fast loop while editing.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
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

function walk(dir, out) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.js')) out.push(p);
  }
  return out;
}

const files = [];
for (const pkg of ['h2', 'protocol', 'vision', 'client', 'server', 'cli'])
  walk(join(root, 'packages', pkg, 'dist', 'test'), files);
/** What makes a test file more than a unit test: sockets, servers, child processes. */
const NOT_UNIT =
  /from 'node:(net|http|http2|https|tls|child_process|dgram)'|startVisionServer|startServer|startGrpcServer|startHttpServer|\bspawn\(|\bfork\(/;
const isUnit = (file) => !file.includes('.integration.') && !NOT_UNIT.test(readFileSync(file, 'utf8'));
const selected = (filter ? files.filter((f) => f.includes(filter)) : files).filter(
  (f) => !unitOnly || isUnit(f),
);
if (selected.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const node = spawnSync(
  process.execPath,
  ['--test', '--test-reporter=spec', `--test-concurrency=${unitOnly ? 2 : 1}`, ...selected],
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
