#!/usr/bin/env node
// Bundles the compiled server (dist/src: the package entry and the boot entry, with
// @visionserve/h2, @visionserve/protocol, @visionserve/vision and @bufbuild/protobuf) into
// dist/bundle/ with esbuild, for `visionserve serve` (see src/entries.ts). Node 20 spends about 1 ms of CPU per
// ES module it loads; the ~270 modules of the server cost ~0.4 s of start-up CPU, the bundle
// ~0.13 s. Native and optional dependencies stay external, and so do the lazily loaded ones.
// The inference worker entry is bundled too (worker threads load their own copy); the JSON
// decode and handler threads keep starting from dist/src. `import.meta.url` in a bundled file
// is rewritten to the URL of the file it was compiled to, so that paths relative to it
// (those worker entries, package.json, the converter script) stay what they were.
import { readFile, rename, rm } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(here, 'dist', 'src');
const target = join(here, 'dist', 'bundle');
// Written beside and renamed into place: a server starting meanwhile sees the old bundle or none.
const out = `${target}.${process.pid}.tmp`;

/** Worker entries bundled too (the inference threads' start-up), as runtime/ refers to them. */
const WORKERS = ['onnx-worker'];

/**
 * Replaces `import.meta.url` in files of dist/src with the URL of the file itself, relative to
 * the bundle, except where a bundled worker entry is named: that URL points into the bundle.
 */
const keepImportMetaUrl = {
  name: 'keep-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, async (args) => {
      if (!args.path.startsWith(src + sep)) return undefined;
      let text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const kept = '__bundle_import_meta_url__';
      for (const w of WORKERS) {
        text = text.replaceAll(`new URL('./${w}.js', import.meta.url)`, `new URL('./${w}.js', ${kept})`);
      }
      const rel = relative(out, args.path).split(sep).join('/');
      text = text.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`);
      return { contents: text.replaceAll(kept, 'import.meta.url'), loader: 'js' };
    });
  },
};

try {
  await build({
    entryPoints: {
      index: join(src, 'index.js'),
      boot: join(src, 'boot.js'),
      ...Object.fromEntries(WORKERS.map((w) => [w, join(src, 'runtime', `${w}.js`)])),
    },
    bundle: true,
    // One copy of every module for both entries (ConfigError thrown by the server is boot's ConfigError).
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    outdir: out,
    external: [
      'onnxruntime-node',
      'sharp',
      '@aws-sdk/*',
      '@opentelemetry/*',
      'prom-client',
      '@visionserve/console',
      'ws',
      'koffi',
    ],
    plugins: [keepImportMetaUrl],
    sourcemap: 'linked',
    logLevel: 'warning',
  });
} catch (error) {
  await rm(out, { recursive: true, force: true });
  throw error;
}
await rm(target, { recursive: true, force: true });
await rename(out, target);
