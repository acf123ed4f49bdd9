/**
 * Layer and package rules of visionserve (docs/architecture.md), checked by `npm run lint`.
 *
 * What is cruised: the TypeScript sources and tests of every package (`packages/*\/src`,
 * `packages/*\/test`, as package.json's lint script names them). Imports of npm packages and
 * of sibling workspace packages resolve into `node_modules/...` and `packages/<pkg>/dist/...`:
 * those targets stay in the graph (rules see them) but are not followed further.
 * scripts/check-layer-rules.mjs plants one violating import per rule in a scratch copy and
 * checks that each one fails; keep it in step with this file.
 */
const S = '^packages/server/src/';
const NATIVE = ['onnxruntime-node', '(^|/)node_modules/sharp/', '(^|/)node_modules/@img/', '@grpc/grpc-js'];
const WORKERS = '^(node:)?worker_threads$';
const TRANSPORTS = '^(node:)?(http|https|http2|net|tls|dgram)$';

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      from: {},
      to: { circular: true },
    },

    // ---- packages
    {
      name: 'h2-is-standalone',
      comment:
        'h2 (our HTTP/2: frames, HPACK, the connection core) imports no other package of ours and no npm package: Node only',
      severity: 'error',
      from: { path: '^packages/h2/src/' },
      to: { path: ['^packages/(protocol|vision|client|server|cli|console)/', '(^|/)node_modules/'] },
    },
    {
      name: 'h2-does-not-use-node-http2',
      comment:
        'h2 is our own HTTP/2: node:http2 is a test oracle (and the node transport of the server and client), never a part of it',
      severity: 'error',
      from: { path: '^packages/h2/src/' },
      to: { path: '^(node:)?http2$' },
    },
    {
      name: 'protocol-is-standalone',
      comment:
        'protocol (Tensor, dtypes, errors, codecs) imports no other package of ours and no native module',
      severity: 'error',
      from: { path: '^packages/protocol/src/' },
      to: { path: ['^packages/(h2|vision|client|server|cli)/', ...NATIVE, WORKERS] },
    },
    {
      name: 'protocol-kserve-has-no-protobuf',
      comment:
        '@visionserve/protocol/kserve (the KServe HTTP codecs the client entry loads) stays free of protobuf; the messages are in /kserve-proto',
      severity: 'error',
      from: { path: '^packages/protocol/src/kserve/' },
      to: { path: ['@bufbuild/protobuf', '^packages/protocol/src/(gen|tfs-proto|kserve-proto)/'] },
    },
    {
      name: 'vision-is-below-client-and-server',
      comment: 'vision imports protocol only (and sharp, lazily, in image.ts)',
      severity: 'error',
      from: { path: '^packages/vision/src/' },
      to: { path: ['^packages/(client|server|cli)/', 'onnxruntime-node', '@grpc/grpc-js', WORKERS] },
    },
    {
      name: 'vision-entry-has-no-sharp',
      comment: 'only @visionserve/vision/image may load sharp; the main entry must stay native-free',
      severity: 'error',
      from: { path: '^packages/vision/src/', pathNot: '^packages/vision/src/image\\.ts$' },
      to: { path: ['(^|/)node_modules/sharp/', '^packages/vision/src/image\\.ts$'] },
    },
    {
      name: 'client-has-no-native-deps',
      comment: 'the client installs without native modules: no server, CLI, onnxruntime, sharp or grpc-js',
      severity: 'error',
      from: { path: '^packages/client/src/' },
      to: { path: ['^packages/(server|cli)/', ...NATIVE, WORKERS] },
    },
    {
      name: 'client-entry-never-reaches-image-helper',
      comment:
        'the main entry of @visionserve/client must not load the image helper (the isolated-install test checks the lazy sharp import at run time)',
      severity: 'error',
      from: { path: '^packages/client/src/index\\.ts$' },
      to: {
        path: ['^packages/client/src/image\\.ts$', '^packages/vision/(src|dist/src)/image\\.'],
        reachable: true,
      },
    },
    {
      name: 'client-grpc-web-entry-is-browser-safe',
      comment:
        '@visionserve/client/grpc-web is bundled into the web console: nothing it reaches may load a Node built-in',
      severity: 'error',
      from: { path: '^packages/client/src/grpc-web\\.ts$' },
      to: {
        path: '^(node:)?(buffer|child_process|crypto|events|fs|http|http2|https|net|os|path|stream|tls|url|util|worker_threads|zlib)(/|$)',
        reachable: true,
      },
    },
    {
      name: 'testkit-is-for-tests-only',
      comment:
        'packages/testkit (the fuzz harness and generators) serves the tests of every package; no package code imports it',
      severity: 'error',
      from: { path: '^packages/[^/]+/src/', pathNot: '^packages/testkit/' },
      // A subpath import (@visionserve/testkit/campaign) stays unresolved in the graph: match its name too.
      to: { path: ['^packages/testkit/', '^@visionserve/testkit(/|$)'] },
    },
    {
      name: 'testkit-knows-only-protocol',
      comment:
        'the testkit builds on protocol alone (protocol tests import it, so it may not reach a package above), opens no socket and loads no native module: a test that uses it stays a unit test',
      severity: 'error',
      from: { path: '^packages/testkit/' },
      to: {
        path: [
          '^packages/(vision|client|server|cli|console|h2)/',
          '^@visionserve/(vision|client|server|console|h2)(/|$)',
          ...NATIVE,
          WORKERS,
          TRANSPORTS,
        ],
      },
    },
    {
      name: 'server-does-not-import-cli',
      severity: 'error',
      from: { path: '^packages/server/' },
      to: { path: '^packages/cli/' },
    },
    {
      name: 'server-does-not-import-client',
      comment: 'the serving path does not depend on the client package (tests may use it)',
      severity: 'error',
      from: { path: S },
      to: { path: '^packages/client/' },
    },
    {
      name: 'packages-import-each-other-by-name',
      comment:
        'a package reaches another only through its package name and exports map, never by relative path',
      severity: 'error',
      from: { path: '^packages/([^/]+)/' },
      to: { path: '^packages/[^/]+/src/', pathNot: '^packages/$1/' },
    },

    // ---- layers of the server package
    {
      name: 'core-is-transport-free',
      comment:
        'core holds serving semantics only: no frontend, runtime, decorator, repository, wire library or native module',
      severity: 'error',
      from: { path: S + 'core/' },
      to: {
        path: [
          S +
            '(frontends|runtime|batching|warmup|repository|config|contracts|observability|security|storage)/',
          S + '(server|index)\\.ts$',
          '^packages/vision/',
          '@bufbuild/protobuf',
          ...NATIVE,
          WORKERS,
          TRANSPORTS,
        ],
      },
    },
    {
      name: 'only-runtime-touches-onnxruntime-and-workers',
      comment:
        'session.run blocks its thread: only runtime/ (worker threads) imports onnxruntime-node; the CLI benchmark floor is the one other user',
      severity: 'error',
      from: {
        path: ['^packages/(server|cli)/src/'],
        pathNot: [S + 'runtime/', '^packages/cli/src/bench/ort-floor'],
      },
      to: { path: ['onnxruntime-node', WORKERS] },
    },
    {
      name: 'runtime-knows-only-core-ports',
      comment:
        'runtime implements core.Session and the handler contract; it knows no frontend, decorator, repository or config',
      severity: 'error',
      from: { path: S + 'runtime/' },
      to: {
        path: [S + '(frontends|batching|warmup|repository|config|storage)/', S + '(server|index)\\.ts$'],
      },
    },
    {
      name: 'batching-knows-only-core-session',
      comment: 'batching decorates a core Session',
      severity: 'error',
      from: { path: S + 'batching/' },
      to: {
        path: [
          S + '(frontends|runtime|repository|warmup|config|contracts)/',
          S + '(server|index)\\.ts$',
          '^packages/vision/',
          ...NATIVE,
        ],
      },
    },
    {
      name: 'warmup-knows-only-core-session',
      comment: 'warmup decorates a SessionFactory; it reads files through an injected reader',
      severity: 'error',
      from: { path: S + 'warmup/' },
      to: {
        path: [
          S + '(frontends|runtime|repository|batching|config|contracts)/',
          S + '(server|index)\\.ts$',
          '^packages/vision/',
          '^(node:)?fs(/promises)?$',
          ...NATIVE,
        ],
      },
    },
    {
      name: 'repository-is-a-leaf',
      comment:
        'repository owns file formats (version dirs, config files, assets); it knows no serving semantics',
      severity: 'error',
      from: { path: S + 'repository/' },
      to: {
        path: [
          S + '(core|frontends|runtime|batching|warmup|config|storage)/',
          S + '(server|index)\\.ts$',
          ...NATIVE,
          WORKERS,
          TRANSPORTS,
        ],
      },
    },
    {
      name: 'storage-knows-only-the-repository',
      comment:
        'storage turns model locations (s3://, archives) into local directories; it reads them with the repository and knows no serving layer',
      severity: 'error',
      from: { path: S + 'storage/' },
      to: {
        path: [
          S + '(core|frontends|runtime|batching|warmup|config|contracts|observability|security)/',
          S + '(server|index)\\.ts$',
          ...NATIVE,
          WORKERS,
        ],
      },
    },
    {
      name: 'only-storage-talks-to-s3',
      comment:
        'the AWS SDK is loaded lazily in one place (storage/s3-store.ts); everything else uses that store',
      severity: 'error',
      from: { path: '^packages/(server|cli)/src/', pathNot: S + 'storage/' },
      to: { path: '(^|/)node_modules/@aws-sdk/' },
    },
    {
      name: 'config-is-a-leaf',
      comment: 'config parses flags, files and environment into one frozen schema',
      severity: 'error',
      from: { path: S + 'config/' },
      to: {
        path: [
          S + '(core|frontends|runtime|batching|warmup|repository|contracts|storage)/',
          S + '(server|index)\\.ts$',
          ...NATIVE,
        ],
      },
    },
    {
      name: 'contracts-are-leaf-types',
      comment:
        'contracts/ holds type-only interfaces shared across layers; they import only protocol and vision types',
      severity: 'error',
      from: { path: S + 'contracts/' },
      to: { path: [S], pathNot: S + 'contracts/' },
    },
    {
      name: 'util-is-a-leaf',
      severity: 'error',
      from: { path: S + 'util/' },
      to: { path: S, pathNot: S + 'util/' },
    },
    {
      name: 'frontends-use-core-api-only',
      comment:
        'frontends may not reach into runtime, decorators, repository or config; only server.ts wires layers',
      severity: 'error',
      from: { path: S + 'frontends/' },
      to: {
        path: [
          S + '(runtime|batching|warmup|repository|config|observability|security|storage)/',
          S + '(server|index)\\.ts$',
          'onnxruntime-node',
          WORKERS,
        ],
      },
    },
    {
      name: 'frontends-do-not-import-siblings',
      comment:
        'one folder per protocol; shared code lives in frontends/http (the HTTP edge), frontends/grpc (the gRPC transport) and frontends/shared',
      severity: 'error',
      from: { path: S + 'frontends/([^/]+)/' },
      to: {
        path: S + 'frontends/',
        pathNot: [S + 'frontends/$1/', S + 'frontends/(?:http|grpc|shared)/'],
      },
    },
    {
      name: 'kserve-operations-are-transport-neutral',
      comment:
        'frontends/kserve/*.ts hold the KServe operations that the HTTP binding (kserve/http/) and a gRPC binding share: no transport in them',
      severity: 'error',
      from: { path: S + 'frontends/kserve/[^/]+\\.ts$', pathNot: S + 'frontends/kserve/index\\.ts$' },
      to: {
        path: [
          S + 'frontends/http/',
          S + 'frontends/kserve/[^/]+/',
          '@grpc/grpc-js',
          '@bufbuild/protobuf',
          '@visionserve/protocol/kserve-proto',
          '^packages/protocol/dist/src/kserve-proto/',
          TRANSPORTS,
        ],
      },
    },
    {
      name: 'edge-knows-no-protocol',
      comment:
        'the transports (HTTP edge, gRPC server) and shared helpers serve every frontend and import none of them',
      severity: 'error',
      from: { path: S + 'frontends/(?:http|grpc|shared)/' },
      to: { path: S + 'frontends/', pathNot: [S + 'frontends/(?:http|grpc|shared)/'] },
    },
    {
      name: 'observability-is-fed-by-observers',
      comment:
        'metrics, logs and tracing see core and the transports only through their observer interfaces (core types, frontends/shared) and reuse only the warmup file format; they reach no runtime, decorator, frontend, repository or config',
      severity: 'error',
      from: { path: S + 'observability/' },
      to: {
        path: [
          S + '(runtime|batching|repository|config|contracts|security|storage)/',
          S + 'frontends/(?!shared/)',
          S + 'warmup/(?!(tfrecord|warmup-file|crc32c)\\.ts$)',
          S + '(server|index)\\.ts$',
          '^packages/vision/',
          ...NATIVE,
          WORKERS,
        ],
      },
    },
    {
      name: 'security-knows-no-serving-layer',
      comment:
        'TLS files and the management policy implement frontends/shared interfaces; they know no core, runtime, decorator or protocol frontend',
      severity: 'error',
      from: { path: S + 'security/' },
      to: {
        path: [
          S + '(core|runtime|batching|warmup|config|contracts|observability|storage)/',
          S + 'frontends/(?!shared/)',
          S + '(server|index)\\.ts$',
          ...NATIVE,
          WORKERS,
        ],
      },
    },
    {
      name: 'server-boot-entry-stays-light',
      comment:
        '@visionserve/server/boot runs before the server loads (config, inference workers started early): it must not reach a protocol, protobuf or onnxruntime',
      severity: 'error',
      from: { path: S + 'boot\\.ts$' },
      to: {
        path: [
          S + '(server|index)\\.ts$',
          S + '(core|frontends|batching|warmup|repository|storage|observability|security)/',
          '^packages/(protocol|vision)/',
          '@bufbuild/protobuf',
          ...NATIVE,
        ],
        reachable: true,
      },
    },
    {
      name: 'only-the-composition-root-imports-server',
      comment: 'server.ts wires the layers; only the package entry re-exports it',
      severity: 'error',
      from: { path: S, pathNot: S + 'index\\.ts$' },
      to: { path: S + 'server\\.ts$' },
    },
    {
      name: 'only-the-composition-root-imports-compose',
      comment: 'compose/ holds the steps of the composition root; no layer may reach into it',
      severity: 'error',
      from: { path: S, pathNot: [S + 'server\\.ts$', S + 'compose/'] },
      to: { path: S + 'compose/' },
    },
  ],
  options: {
    doNotFollow: { path: ['node_modules', '^packages/[^/]+/dist/'] },
    exclude: { path: ['^packages/[^/]+/src/gen/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
    combinedDependencies: true,
  },
};
