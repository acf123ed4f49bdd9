#!/usr/bin/env node
// Lists every function, method, accessor, constructor and arrow function in packages/*/src longer
// than the limit (150 lines by default; `--max N` to change it), generated code (any `gen/`
// directory) excluded. A function's length runs from its first token to its last line, nested
// functions included. Prints `file:line name length`, longest first, and exits 1 if any is listed,
// except the functions of KNOWN_LONG below at no more than their recorded length (a ratchet, run by
// `npm run lint`: they may shrink or go, never grow, and nothing new may join them).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
const maxArg = process.argv.indexOf('--max');
const maxLines = maxArg === -1 ? 150 : Number(process.argv[maxArg + 1]);
if (!Number.isInteger(maxLines) || maxLines < 1) {
  console.error('usage: check-function-length.mjs [--max LINES]');
  process.exit(2);
}

function sourceFiles(dir) {
  const files = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'gen' && entry.name !== 'node_modules') files.push(...sourceFiles(path));
    } else if (/\.(m|c)?tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      files.push(path);
    }
  }
  return files;
}

function isFunctionLike(node) {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

/** The name a reader would search for: its own, or that of what it is assigned to. */
function functionName(node, sourceFile) {
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  if (node.name) return node.name.getText(sourceFile);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) {
    return parent.name.getText(sourceFile);
  }
  if (ts.isPropertyDeclaration(parent)) return parent.name.getText(sourceFile);
  if (ts.isBinaryExpression(parent)) return parent.left.getText(sourceFile);
  if (ts.isCallExpression(parent)) {
    return `<callback of ${parent.expression.getText(sourceFile).slice(0, 40)}>`;
  }
  return '<anonymous>';
}

function longFunctions(path) {
  const text = readFileSync(path, 'utf8');
  const sourceFile = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    if (isFunctionLike(node) && node.body) {
      const first = sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile)).line;
      const last = sourceFile.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > maxLines) {
        found.push({ line: first + 1, name: functionName(node, sourceFile), lines });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return found;
}

/**
 * Functions still over the limit, with the length they may not exceed: `file name` -> lines.
 * Each one is a consolidation still owed (issue 32); remove its entry once it is split.
 */
const KNOWN_LONG = new Map([
  ['packages/server/src/frontends/grpc/grpc-server.ts startGrpcServer', 506],
  ['packages/server/src/frontends/grpc/grpc-server.ts readMessage', 163],
  ['packages/server/src/frontends/grpc/grpc-server.ts <anonymous>', 159],
  ['packages/protocol/src/numeric-json.ts list', 190],
]);
const ratchet = process.argv.includes('--ratchet');

const packagesDir = join(root, 'packages');
const results = [];
for (const pkg of readdirSync(packagesDir, { withFileTypes: true })) {
  if (!pkg.isDirectory()) continue;
  const srcDir = join(packagesDir, pkg.name, 'src');
  let files;
  try {
    files = sourceFiles(srcDir);
  } catch {
    continue;
  }
  for (const file of files) {
    for (const fn of longFunctions(file)) results.push({ file: relative(root, file), ...fn });
  }
}
results.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
const known = (r) => r.lines <= (KNOWN_LONG.get(`${r.file} ${r.name}`) ?? 0);
const failing = ratchet ? results.filter((r) => !known(r)) : results;
for (const r of failing) console.log(`${r.file}:${r.line} ${r.name} ${r.lines}`);
if (failing.length > 0) {
  console.error(
    ratchet
      ? `${failing.length} function(s) over ${maxLines} lines that are new or grew (scripts/check-function-length.mjs KNOWN_LONG)`
      : `${failing.length} function(s) over ${maxLines} lines`,
  );
  process.exit(1);
}
if (ratchet)
  console.log(`function length: none new over ${maxLines} lines; ${results.length} known ones left`);
