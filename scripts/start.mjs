#!/usr/bin/env node
// `npm start` (after the build): `visionserve serve` with the glibc malloc settings for large
// tensors (packages/cli/src/malloc-tuning.ts). glibc reads them only at process start, so when
// the environment lacks them this launcher starts the server as its child with them (as
// `visionserve serve` does: passing signals on, leaving with its exit code); otherwise it
// serves in this process.
// Extra arguments go to `visionserve serve`.
import { fileURLToPath } from 'node:url';
import { main } from '../packages/cli/dist/src/main.js';
import { serveWithMallocTuning, wantsMallocTuning } from '../packages/cli/dist/src/malloc-tuning.js';

const bin = fileURLToPath(new URL('../packages/cli/bin/visionserve.js', import.meta.url));
const args = ['serve', ...process.argv.slice(2)];
process.exitCode = wantsMallocTuning(process.env)
  ? await serveWithMallocTuning([bin, ...args])
  : await main(args, process.env);
