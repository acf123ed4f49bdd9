#!/usr/bin/env node
// `npm run bench`: the full benchmark with the committed settings (all cases, all paths,
// closed and open loop), results in bench/results/latest/{results.md,results.json,chart.svg}.
// Extra arguments are passed to `visionserve bench` (see `visionserve bench --help`).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../packages/cli/dist/src/main.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.exitCode = await main(
  ['bench', '--out', join(root, 'bench', 'results', 'latest'), '--repeat', '2', ...process.argv.slice(2)],
  process.env,
);
