#!/usr/bin/env node
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write(
    'visionserve is not built yet: run `npm run build` (or `npm start`) in the checkout first\n',
  );
  process.exit(1);
}
// `serve` needs the malloc settings at process start (glibc reads them only then): without them it
// serves as a child that has them (one launcher process waits on it and passes signals on).
if (process.argv[2] === 'serve') {
  const tuning = await import(new URL('../dist/src/malloc-tuning.js', import.meta.url).href);
  const rerun = tuning.rerunForServe(process.argv.slice(3));
  if (rerun !== undefined) {
    process.exitCode = await rerun;
    process.exit();
  }
}
// The benchmark runs its floors in this process: glibc must start with the same malloc settings
// as the servers it starts, and its load generator receives 34 MiB answers, for which V8 wants a
// larger initial old generation (src/malloc-tuning.ts): it runs itself again with both.
if (process.argv[2] === 'bench') {
  const tuning = await import(new URL('../dist/src/malloc-tuning.js', import.meta.url).href);
  const rerun = tuning.rerunForBench();
  if (rerun !== undefined) {
    process.exitCode = await rerun;
    process.exit();
  }
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2), process.env);
