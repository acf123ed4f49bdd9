#!/usr/bin/env node
// Fails when a doc pointer does not resolve: a relative link in README.md or a markdown file
// under docs/ or packages/*/ naming a file that does not exist, or a `docs/….md` path named in
// the source (comments included) of packages/*/src, scripts/ or bench/. Run by `npm run lint`.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SKIP = new Set(['node_modules', 'dist', 'gen', '.git', 'results']);

function walk(dir, keep, out = []) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name) || name.startsWith('.venv') || name === '.cache') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, keep, out);
    else if (keep(name)) out.push(p);
  }
  return out;
}

const problems = [];
const markdown = [
  join(root, 'README.md'),
  ...walk(join(root, 'docs'), (n) => n.endsWith('.md')),
  ...walk(join(root, 'packages'), (n) => n.endsWith('.md')),
  ...walk(join(root, 'bench'), (n) => n.endsWith('.md')),
];
const LINK = /\]\(([^)\s]+)\)/g;
for (const file of markdown) {
  const text = readFileSync(file, 'utf8');
  for (const [, target] of text.matchAll(LINK)) {
    if (/^[a-z]+:/i.test(target) || target.startsWith('#')) continue;
    const path = decodeURIComponent(target.split('#')[0]);
    if (!existsSync(join(dirname(file), path))) problems.push(`${relative(root, file)}: link to ${target}`);
  }
}
const DOC_PATH = /\bdocs\/[A-Za-z0-9_./-]+\.md\b/g;
const sources = [
  ...walk(join(root, 'packages'), (n) => /\.(ts|mjs|js|py)$/.test(n) && !n.endsWith('.d.ts')),
  ...walk(join(root, 'scripts'), (n) => /\.(mjs|js|sh|py)$/.test(n)),
  ...walk(join(root, 'bench'), (n) => /\.(mjs|js|sh|py)$/.test(n)),
];
for (const file of sources) {
  for (const [path] of readFileSync(file, 'utf8').matchAll(DOC_PATH)) {
    if (!existsSync(join(root, path))) problems.push(`${relative(root, file)}: names ${path}`);
  }
}
if (problems.length > 0) {
  console.error(`doc pointers that do not resolve:\n  ${[...new Set(problems)].join('\n  ')}`);
  process.exit(1);
}
console.log(`doc pointers: ${markdown.length} markdown files, ${sources.length} sources, all resolve`);
