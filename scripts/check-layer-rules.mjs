#!/usr/bin/env node
// Proves that the layer rules in .dependency-cruiser.cjs bite: in a scratch copy of the
// workspace, plant one violating import per rule, cruise once, and require that every
// planted edge is reported under its rule. Fails when a rule has no plant here, so the two
// files stay in step. Run by `npm run lint` after `npm run build` (targets resolve into dist/).
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const config = createRequire(import.meta.url)(join(root, '.dependency-cruiser.cjs'));

/** rule name -> [file that gets the import, import specifier, module the edge must reach]. */
const PLANTS = {
  // validate-inputs.ts imports signature.ts: the reverse import closes a cycle.
  'no-cycles': [
    'packages/server/src/core/signature.ts',
    './validate-inputs.js',
    'packages/server/src/core/validate-inputs.ts',
  ],
  'h2-is-standalone': ['packages/h2/src/flood-guard.ts', '@visionserve/protocol', 'packages/protocol/'],
  'h2-does-not-use-node-http2': ['packages/h2/src/receive-window.ts', 'node:http2', 'http2'],
  'protocol-is-standalone': ['packages/protocol/src/tensor.ts', 'onnxruntime-node', 'onnxruntime-node'],
  'protocol-kserve-has-no-protobuf': [
    'packages/protocol/src/kserve/half.ts',
    '../kserve-proto/index.js',
    'packages/protocol/src/kserve-proto/index.ts',
  ],
  'vision-is-below-client-and-server': [
    'packages/vision/src/labels.ts',
    '@visionserve/client',
    'packages/client/',
  ],
  'vision-entry-has-no-sharp': ['packages/vision/src/classification.ts', 'sharp', 'node_modules/sharp/'],
  'client-has-no-native-deps': [
    'packages/client/src/model-ref.ts',
    '@visionserve/server',
    'packages/server/',
  ],
  'client-grpc-web-entry-is-browser-safe': ['packages/client/src/grpc-web.ts', 'node:http2', 'http2'],
  'client-entry-never-reaches-image-helper': [
    'packages/client/src/index.ts',
    './image.js',
    'packages/client/src/image.ts',
  ],
  'server-boot-entry-stays-light': [
    'packages/server/src/boot.ts',
    '@visionserve/protocol',
    'packages/protocol/',
  ],
  'testkit-is-for-tests-only': [
    'packages/protocol/src/dtype.ts',
    '@visionserve/testkit/campaign',
    '@visionserve/testkit/campaign',
  ],
  'testkit-knows-only-protocol': [
    'packages/testkit/src/arbitraries.ts',
    '@visionserve/vision',
    'packages/vision/',
  ],
  'server-does-not-import-cli': ['packages/server/src/util/logger.ts', 'visionserve', 'packages/cli/'],
  'server-does-not-import-client': [
    'packages/server/src/frontends/http/send.ts',
    '@visionserve/client',
    'packages/client/',
  ],
  'packages-import-each-other-by-name': [
    'packages/client/src/tensors.ts',
    '../../protocol/src/dtype.js',
    'packages/protocol/src/dtype.ts',
  ],
  'core-is-transport-free': ['packages/server/src/core/version-policy.ts', 'sharp', 'node_modules/sharp/'],
  'only-runtime-touches-onnxruntime-and-workers': [
    'packages/server/src/batching/tensor-rows.ts',
    'onnxruntime-node',
    'onnxruntime-node',
  ],
  'runtime-knows-only-core-ports': [
    'packages/server/src/runtime/session-options.ts',
    '../repository/list-versions.js',
    'packages/server/src/repository/list-versions.ts',
  ],
  'batching-knows-only-core-session': [
    'packages/server/src/batching/batching-stats.ts',
    '../runtime/wire-tensor.js',
    'packages/server/src/runtime/wire-tensor.ts',
  ],
  'warmup-knows-only-core-session': ['packages/server/src/warmup/crc32c.ts', 'node:fs', 'fs'],
  'repository-is-a-leaf': [
    'packages/server/src/repository/optional-file.ts',
    '../core/model-manager.js',
    'packages/server/src/core/model-manager.ts',
  ],
  'storage-knows-only-the-repository': [
    'packages/server/src/storage/s3-mirror.ts',
    '../core/model-state.js',
    'packages/server/src/core/model-state.ts',
  ],
  'only-storage-talks-to-s3': [
    'packages/server/src/repository/optional-file.ts',
    '@aws-sdk/client-s3',
    'node_modules/@aws-sdk/client-s3',
  ],
  'config-is-a-leaf': [
    'packages/server/src/config/server-config.ts',
    '../core/signature.js',
    'packages/server/src/core/signature.ts',
  ],
  'contracts-are-leaf-types': [
    'packages/server/src/contracts/handler-host.ts',
    '../core/session.js',
    'packages/server/src/core/session.ts',
  ],
  'util-is-a-leaf': [
    'packages/server/src/util/logger.ts',
    '../core/model-state.js',
    'packages/server/src/core/model-state.ts',
  ],
  'frontends-use-core-api-only': [
    'packages/server/src/frontends/tfs-rest/tfs-rest-json.ts',
    '../../runtime/wire-tensor.js',
    'packages/server/src/runtime/wire-tensor.ts',
  ],
  'frontends-do-not-import-siblings': [
    'packages/server/src/frontends/tfs-grpc/tfs-messages.ts',
    '../sagemaker/index.js',
    'packages/server/src/frontends/sagemaker/index.ts',
  ],
  'kserve-operations-are-transport-neutral': [
    'packages/server/src/frontends/kserve/statistics-json.ts',
    '../http/send.js',
    'packages/server/src/frontends/http/send.ts',
  ],
  'edge-knows-no-protocol': [
    'packages/server/src/frontends/shared/concurrency-limit.ts',
    '../tfs-rest/index.js',
    'packages/server/src/frontends/tfs-rest/index.ts',
  ],
  'observability-is-fed-by-observers': [
    'packages/server/src/observability/access-log.ts',
    '../runtime/wire-tensor.js',
    'packages/server/src/runtime/wire-tensor.ts',
  ],
  'security-knows-no-serving-layer': [
    'packages/server/src/security/management-policy.ts',
    '../core/signature.js',
    'packages/server/src/core/signature.ts',
  ],
  'only-the-composition-root-imports-server': [
    'packages/server/src/frontends/http/start-http-server.ts',
    '../../server.js',
    'packages/server/src/server.ts',
  ],
  'only-the-composition-root-imports-compose': [
    'packages/server/src/core/model-manager.ts',
    '../compose/readiness.js',
    'packages/server/src/compose/readiness.ts',
  ],
};

const rules = config.forbidden.map((r) => r.name);
const unplanted = rules.filter((r) => !(r in PLANTS));
const stale = Object.keys(PLANTS).filter((r) => !rules.includes(r));
if (unplanted.length > 0 || stale.length > 0) {
  console.error(
    `check-layer-rules: rules without a planted violation: [${unplanted}]; plants for missing rules: [${stale}]`,
  );
  process.exit(1);
}

const scratch = mkdtempSync(join(tmpdir(), 'vs-layer-rules-'));
try {
  // The packages (sources, tests, package.json and dist for resolution), a node_modules of
  // links to the real one whose workspace links point into the scratch copy, and the config.
  for (const pkg of readdirSync(join(root, 'packages'))) {
    cpSync(join(root, 'packages', pkg), join(scratch, 'packages', pkg), {
      recursive: true,
      filter: (src) => !src.includes(`${pkg}/node_modules`),
    });
  }
  const modules = join(scratch, 'node_modules');
  mkdirSync(join(modules, '@visionserve'), { recursive: true });
  for (const name of readdirSync(join(root, 'node_modules'))) {
    if (name === '@visionserve' || name === 'visionserve' || name === '.bin') continue;
    symlinkSync(join(root, 'node_modules', name), join(modules, name));
  }
  for (const pkg of readdirSync(join(root, 'node_modules', '@visionserve'))) {
    symlinkSync(join(scratch, 'packages', pkg), join(modules, '@visionserve', pkg));
  }
  symlinkSync(join(scratch, 'packages', 'cli'), join(modules, 'visionserve'));
  for (const file of ['.dependency-cruiser.cjs', 'tsconfig.base.json'])
    cpSync(join(root, file), join(scratch, file));

  for (const [file, specifier] of Object.values(PLANTS)) {
    appendFileSync(join(scratch, file), `\nimport '${specifier}';\n`);
  }
  let output;
  try {
    output = execFileSync(
      process.execPath,
      [
        join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs'),
        '--config',
        '.dependency-cruiser.cjs',
        '--output-type',
        'json',
        ...readdirSync(join(scratch, 'packages'))
          .flatMap((p) => [`packages/${p}/src`, `packages/${p}/test`])
          .filter((p) => existsSync(join(scratch, p))),
      ],
      { cwd: scratch, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] },
    );
  } catch (error) {
    output = error.stdout; // depcruise exits non-zero when it finds violations: expected here.
  }
  const violations = JSON.parse(output).summary.violations;
  const missed = [];
  for (const [rule, [file, , target]] of Object.entries(PLANTS)) {
    const hit = violations.some(
      (v) =>
        v.rule.name === rule &&
        (v.from === file || (rule === 'no-cycles' && v.cycle?.some((c) => (c.name ?? c) === file))) &&
        (rule === 'no-cycles' || v.to.includes(target)),
    );
    console.log(`${hit ? 'bites ' : 'MISSED'}  ${rule}: ${file} -> ${PLANTS[rule][1]}`);
    if (!hit) missed.push(rule);
  }
  if (missed.length > 0) {
    console.error(
      `check-layer-rules: ${missed.length} rule(s) did not catch their planted import: ${missed.join(', ')}`,
    );
    process.exit(1);
  }
  console.log(`check-layer-rules: all ${rules.length} rules fail on their planted violation`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
