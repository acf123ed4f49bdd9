#!/usr/bin/env node
// Runs the fuzz targets (packages/*/test/fuzz, compiled) as a long campaign, or replays a
// failure, and prints the inputs tried per target. See docs/fuzzing.md.
// Usage: node scripts/fuzz.mjs [--seconds N] [--scale N] [--target TEXT] [--seed N] [--path P]
//                              [--report FILE]
//   --seconds N  every target runs for N seconds (default 15; 0 runs the short CI campaign)
//   --scale N    short campaign only: multiplies every target's input count
//   --target T   only targets whose name contains T (e.g. "kserve", "image/hostile")
//   --seed N, --path P   replay the counterexample a failure reported
//   --report F   also keep the per-target JSON lines in F
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const flags = new Map();
for (let i = 0; i < args.length; i++) {
  const name = args[i];
  if (!name.startsWith('--') || i + 1 >= args.length) {
    console.error(`fuzz: unexpected argument "${name}" (every option takes a value; see docs/fuzzing.md)`);
    process.exit(2);
  }
  flags.set(name.slice(2), args[++i]);
}
const known = new Set(['seconds', 'scale', 'target', 'seed', 'path', 'report']);
for (const name of flags.keys()) {
  if (!known.has(name)) {
    console.error(`fuzz: unknown option --${name} (known: ${[...known].map((k) => `--${k}`).join(', ')})`);
    process.exit(2);
  }
}

const files = [];
for (const pkg of ['h2', 'protocol', 'vision', 'client', 'server', 'cli']) {
  const dir = join(root, 'packages', pkg, 'dist', 'test', 'fuzz');
  if (!existsSync(dir)) continue;
  // Only targets whose source still exists: tsc -b leaves the output of a moved one behind.
  const source = join(root, 'packages', pkg, 'test', 'fuzz');
  for (const name of readdirSync(dir).sort()) {
    if (name.endsWith('.test.js') && existsSync(join(source, name.replace(/\.js$/, '.ts'))))
      files.push(join(dir, name));
  }
}
if (files.length === 0) {
  console.error('fuzz: no compiled fuzz targets; run `npx tsc -b packages/cli` first');
  process.exit(1);
}

const replay = flags.has('seed') || flags.has('path');
const seconds = replay ? undefined : Number(flags.get('seconds') ?? 15);
if (seconds !== undefined && !(seconds >= 0)) {
  console.error('fuzz: --seconds must be a non-negative number');
  process.exit(2);
}
const scratch = mkdtempSync(join(tmpdir(), 'visionserve-fuzz-'));
const report = flags.get('report') ?? join(scratch, 'report.jsonl');
writeFileSync(report, '');
const env = { ...process.env, VISIONSERVE_FUZZ_REPORT: report };
if (seconds !== undefined && seconds > 0) env.VISIONSERVE_FUZZ_SECONDS = String(seconds);
for (const [flag, variable] of [
  ['scale', 'VISIONSERVE_FUZZ_SCALE'],
  ['target', 'VISIONSERVE_FUZZ_TARGET'],
  ['seed', 'VISIONSERVE_FUZZ_SEED'],
  ['path', 'VISIONSERVE_FUZZ_PATH'],
]) {
  if (flags.has(flag)) env[variable] = flags.get(flag);
}

const mode = replay
  ? `replaying seed ${flags.get('seed') ?? '(none)'}${flags.has('path') ? ` path ${flags.get('path')}` : ''}`
  : seconds > 0
    ? `long campaign: ${seconds} s per target`
    : `short campaign (scale ${flags.get('scale') ?? 1})`;
console.log(`fuzz: ${mode}${flags.has('target') ? `, targets matching "${flags.get('target')}"` : ''}`);
const started = Date.now();
const run = spawnSync(
  process.execPath,
  ['--test', '--test-reporter=spec', '--test-concurrency=1', ...files],
  { stdio: 'inherit', cwd: root, env },
);

const rows = readFileSync(report, 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line));
if (!flags.has('report')) rmSync(scratch, { recursive: true, force: true });
const width = Math.max(6, ...rows.map((r) => r.target.length));
console.log(`\n${'target'.padEnd(width)}  ${'inputs'.padStart(10)}  result`);
let total = 0;
for (const r of rows) {
  total += r.inputs;
  console.log(
    `${r.target.padEnd(width)}  ${String(r.inputs).padStart(10)}  ${r.ok ? 'ok' : `FAILED: npm run fuzz -- --target ${JSON.stringify(r.target)} --seed ${r.seed}${r.path ? ` --path ${JSON.stringify(r.path)}` : ''}`}${r.note ? `  ${r.note.replace(/^;\s*/, '')}` : ''}`,
  );
}
const failed = rows.filter((r) => !r.ok).length;
console.log(
  `\n${rows.length} targets, ${total} inputs, ${failed} failed, ${((Date.now() - started) / 1000).toFixed(0)} s`,
);
process.exit(run.status ?? 1);
