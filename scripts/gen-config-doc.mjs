#!/usr/bin/env node
// Writes docs/configuration.md from the flag table and the defaults (packages/server/src/config),
// or with --check fails when the committed doc differs (run by `npm run lint`). Needs the build.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { renderConfigurationDoc } = await import(join(root, 'packages/server/dist/src/config/flag-docs.js'));
const target = join(root, 'docs', 'configuration.md');
const prettier = await import('prettier');
const options = (await prettier.resolveConfig(target)) ?? {};
// Formatted as `prettier --check docs` wants it, so that the lint's two checks agree.
const text = await prettier.format(renderConfigurationDoc(), { ...options, filepath: target });
if (process.argv.includes('--check')) {
  let committed = '';
  try {
    committed = readFileSync(target, 'utf8');
  } catch {
    // missing: stale
  }
  if (committed !== text) {
    console.error('docs/configuration.md is stale: run node scripts/gen-config-doc.mjs');
    process.exit(1);
  }
} else {
  writeFileSync(target, text);
}
