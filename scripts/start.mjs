#!/usr/bin/env node
// `npm start` (after the build): `visionserve serve` with the extra arguments, run as the CLI
// runs it (with the glibc malloc settings for large tensors: packages/cli/src/malloc-tuning.ts).
import { fileURLToPath } from 'node:url';

const bin = new URL('../packages/cli/bin/visionserve.js', import.meta.url);
process.argv.splice(1, 1, fileURLToPath(bin), 'serve');
await import(bin.href);
