#!/usr/bin/env node
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write(
    'visionserve is not built yet: run `npm run build` (or `npm start`) in the checkout first\n',
  );
  process.exit(1);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2), process.env);
