#!/usr/bin/env node
// Builds the console into dist/: type-checks src/, bundles src/app.ts (with uPlot and the
// gRPC-web client) with esbuild, and copies the page, the styles and the docs UI bundle
// (swagger-ui-dist) so that nothing is fetched from a CDN.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const dist = join(here, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(join(dist, 'docs'), { recursive: true });

execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(here, 'tsconfig.json')], {
  stdio: 'inherit',
});

await build({
  entryPoints: [join(here, 'src', 'app.ts')],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2022'],
  platform: 'browser',
  sourcemap: false,
  outfile: join(dist, 'app.js'),
  logLevel: 'warning',
  legalComments: 'linked',
});

copyFileSync(join(here, 'src', 'index.html'), join(dist, 'index.html'));
copyFileSync(join(here, 'src', 'style.css'), join(dist, 'style.css'));
copyFileSync(require.resolve('uplot/dist/uPlot.min.css'), join(dist, 'uPlot.min.css'));
const swagger = dirname(require.resolve('swagger-ui-dist/package.json'));
for (const file of ['swagger-ui.css', 'swagger-ui-bundle.js', 'LICENSE', 'NOTICE']) {
  copyFileSync(join(swagger, file), join(dist, 'docs', file));
}
writeFileSync(
  join(dist, 'docs', 'docs-init.js'),
  "window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });\n",
);
console.log(`console built in ${dist}`);
