#!/usr/bin/env node
// `npm run bench`: every suite (latency, sweep, cold-start, overload) with the committed settings; the
// estimated duration is printed first and one progress line per step goes to stderr.
// Results: bench/results/latest/{results.md,results.json,chart.svg}. Extra arguments go to
// `visionserve bench` and override these (e.g. `npm run bench -- --suite latency`).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../packages/cli/dist/src/main.js';
import { rerunForBench } from '../packages/cli/dist/src/malloc-tuning.js';

// Floors run in this process: it starts with the servers' malloc settings, and the load generator
// with V8 flags for large answers (src/malloc-tuning.ts).
const rerun = rerunForBench();
if (rerun !== undefined) process.exit(await rerun);

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.exitCode = await main(
  [
    'bench',
    '--suite',
    'all',
    '--out',
    join(root, 'bench', 'results', 'latest'),
    '--repeat',
    '2',
    ...process.argv.slice(2),
  ],
  process.env,
);
