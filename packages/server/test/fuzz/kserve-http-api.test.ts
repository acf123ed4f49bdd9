/**
 * Fuzz target: the whole Open Inference Protocol (KServe v2) HTTP API over a real socket, with
 * fake models: hostile paths, methods, headers, compressed bodies (bombs, lies), and repository
 * loads that try to leave the model roots. The codec under it is fuzzed in
 * packages/protocol/test/fuzz/kserve.test.ts.
 */
import { after, before, describe, it } from 'node:test';
import { request as httpRequest, Agent } from 'node:http';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { type Tensor, notFound } from '@visionserve/protocol';
import { type HttpInferRequestInit, decodeHttpInferResponse } from '@visionserve/protocol/kserve';
import { ALL_DTYPES, hostileStringArb, mutate, mutationArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, targetOptions } from '@visionserve/testkit/campaign';
import { DEFAULTS } from '../../src/config/server-config.js';
import { httpServerSettings } from '../../src/compose/config-settings.js';
import { bodyOf, headerLengthArb, requestInitArb, tensorOf } from '@visionserve/testkit/kserve-requests';
import type { ServableAssets } from '../../src/contracts/servable-assets.js';
import type { CallOptions, ModelSpec, PredictRequest } from '../../src/core/inference-service.js';
import type { ModelConfig } from '../../src/core/model-config.js';
import type { ModelRegistry } from '../../src/core/model-registry.js';
import type { Signature } from '../../src/core/signature.js';
import { validateInputs, validateOutputFilter } from '../../src/core/validate-inputs.js';
import { createHttpEdge } from '../../src/frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from '../../src/frontends/http/start-http-server.js';
import { createKServeHttpApi, createKServeService } from '../../src/frontends/kserve/index.js';
import { createInferenceStatistics } from '../../src/core/inference-statistics.js';
import { findModelDirectory, listModelDirectories } from '../../src/repository/model-roots.js';
import { createJsonLogger } from '../../src/util/logger.js';
import { fakeInferenceService } from '../fakes.js';

const utf8 = new TextEncoder();

const PREDICT = 'tensorflow/serving/predict';
const HALF: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1] } },
  outputs: { y: { name: 'y', dtype: 'float32', shape: [-1] } },
  methodName: PREDICT,
};
const ECHO: Signature = {
  inputs: Object.fromEntries(ALL_DTYPES.map((d) => [`in_${d}`, { name: `in_${d}`, dtype: d, shape: [-1] }])),
  outputs: Object.fromEntries(
    ALL_DTYPES.map((d) => [`out_${d}`, { name: `out_${d}`, dtype: d, shape: [-1] }]),
  ),
  methodName: PREDICT,
};
const CONFIGURED = ['half', 'echo'];

describe('fuzz: KServe v2 HTTP API over a socket', () => {
  const models = new Map<string, { signature: Signature; config: ModelConfig }>();
  const configOf = (name: string, basePath = `/models/${name}`): ModelConfig => ({
    name,
    basePath,
    versionPolicy: { kind: 'latest', numVersions: 1 },
    versionLabels: {},
  });
  const resolve = (spec: ModelSpec): { version: number; signature: Signature } => {
    const m = models.get(spec.name);
    if (m === undefined) throw notFound(`Servable not found for request: Latest(${spec.name})`);
    if (spec.version !== undefined && spec.version !== 1) {
      throw notFound(`Servable not found for request: Specific(${spec.name}, ${spec.version})`);
    }
    return { version: 1, signature: m.signature };
  };
  const run = (req: PredictRequest, _options?: CallOptions) => {
    const { signature } = resolve(req.model);
    // What the real core checks before a run.
    validateInputs(signature, req.inputs);
    validateOutputFilter(signature, req.outputFilter);
    const outputs: Record<string, Tensor> = {};
    if (signature === ECHO) {
      for (const [k, t] of Object.entries(req.inputs)) outputs[k.replace(/^in_/, 'out_')] = t;
    } else {
      const x = req.inputs['x']!;
      outputs['y'] = { dtype: 'float32', shape: x.shape, data: (x.data as Float32Array).map((v) => v / 2) };
    }
    const filter = req.outputFilter;
    const kept =
      filter !== undefined && filter.length > 0
        ? Object.fromEntries(Object.entries(outputs).filter(([k]) => filter.includes(k)))
        : outputs;
    return Promise.resolve({
      model: { name: req.model.name, version: 1, signatureName: 'serving_default' },
      outputs: kept,
    });
  };
  const service = fakeInferenceService<ServableAssets>({
    resolve,
    run,
    status(spec) {
      resolve(spec);
      return [{ version: 1, state: 'AVAILABLE' }];
    },
    modelNames: () => [...models.keys()],
  });
  const registry: ModelRegistry = {
    modelConfig: (name) => models.get(name)?.config,
    addModel(config) {
      models.set(config.name, { signature: HALF, config });
      return Promise.resolve();
    },
    removeModel(name) {
      if (!models.delete(name)) return Promise.reject(notFound(`no ${name}`));
      return Promise.resolve();
    },
  };

  let server: StartedHttpServer;
  let roots: string;
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const logs: string[] = [];

  before(async () => {
    roots = await mkdtemp(join(tmpdir(), 'vs-fuzz-kserve-'));
    await mkdir(join(roots, 'extra', '1'), { recursive: true });
    await mkdir(join(tmpdir(), 'vs-fuzz-kserve-outside', '1'), { recursive: true });
    await symlink(join(tmpdir(), 'vs-fuzz-kserve-outside'), join(roots, 'escape'));
    models.set('half', { signature: HALF, config: configOf('half') });
    models.set('echo', { signature: ECHO, config: configOf('echo') });
    const logger = createJsonLogger({ level: 'warn', write: (line) => logs.push(line) });
    const kserve = createKServeService({
      service,
      registry,
      statistics: createInferenceStatistics(),
      roots: { list: () => listModelDirectories([roots]), resolve: (n) => findModelDirectory([roots], n) },
      modelControl: 'explicit',
      dynamicBatching: DEFAULTS.enableBatching,
      serverVersion: '0.0.0',
      maxBatchSize: 8,
      instanceCount: 1,
      logger,
    });
    server = await startHttpServer({
      ...httpServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      edge: createHttpEdge({
        apis: [
          createKServeHttpApi({
            kserve,
            bodyLimitBytes: 256 * 1024,
            decompressedBodyLimitBytes: 1 << 20,
            requestTimeoutMs: 5_000,
          }),
        ],
        logger,
        notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
      }),
    });
  });

  after(async () => {
    agent.destroy();
    await server.close(0);
    await rm(roots, { recursive: true, force: true });
    await rm(join(tmpdir(), 'vs-fuzz-kserve-outside'), { recursive: true, force: true });
  });

  interface Reply {
    status: number;
    headers: Record<string, string | string[] | undefined>;
    body: Buffer;
  }

  function send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Uint8Array,
  ): Promise<Reply> {
    return new Promise((resolvePromise, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port: server.port, method, path, headers, agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            resolvePromise({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks),
            });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
      // An explicit length: node's client sends a DELETE body with neither Content-Length nor chunking.
      const bytes = method === 'GET' || method === 'HEAD' ? Buffer.alloc(0) : Buffer.from(body);
      if (bytes.byteLength > 0) req.setHeader('Content-Length', String(bytes.byteLength));
      req.end(bytes);
    });
  }

  /** Model path segments: configured, in the roots, escaping them, percent-encoded hostile text. */
  const segmentArb = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('half', 'echo', 'extra', 'escape', 'nope', 'half%20') },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '..',
        '%2e%2e',
        '%2E%2E%2Fetc',
        '%2F',
        '%',
        '%zz',
        '%00',
        '%C0%AE',
        '.',
        '%5C..',
      ),
    },
    {
      weight: 2,
      arbitrary: hostileStringArb.map((s) => encodeURIComponent(s.replace(/[\uD800-\uDFFF]/g, 'x'))),
    },
  );
  const versionArb = fc.constantFrom(
    '',
    '/versions/1',
    '/versions/2',
    '/versions/0',
    '/versions/99999999999999999999',
    '/versions/01',
    '/versions/-1',
    '/versions/',
  );
  const pathArb = fc.oneof(
    fc.constantFrom(
      '/v2',
      '/v2/',
      '/v2/health/live',
      '/v2/health/ready',
      '/v2/models/stats',
      '/v2//models',
      '/v2/models',
    ),
    fc
      .tuple(
        segmentArb,
        versionArb,
        fc.constantFrom('', '/ready', '/config', '/stats', '/infer', '/infer/', '/x'),
      )
      .map(([m, v, s]) => `/v2/models/${m}${v}${s}`),
    fc
      .tuple(segmentArb, fc.constantFrom('load', 'unload', 'index'))
      .map(([m, a]) => `/v2/repository/models/${m}/${a}`),
    fc.tuple(segmentArb).map(([r]) => `/v2/repository/${r}/index`),
    fc.constant('/v2/repository/index'),
  );

  /** Bodies: encoded infer requests for the fake models, mutated; repository bodies; garbage. */
  const echoInitArb: fc.Arbitrary<HttpInferRequestInit> = fc
    .constant(ALL_DTYPES)
    .chain((dtypes) =>
      fc.tuple(
        ...dtypes.map((dtype) =>
          fc.boolean().chain((b) => {
            const binary = b || dtype === 'bfloat16';
            return tensorOf(dtype, !binary, 12, 1).map((tensor) => ({ name: `in_${dtype}`, tensor, binary }));
          }),
        ),
      ),
    )
    .chain((inputs) =>
      fc.record({
        inputs: fc.constant(inputs),
        binaryOutput: fc.boolean(),
        outputs: fc.option(
          fc.subarray(inputs.map((i) => ({ name: i.name.replace(/^in_/, 'out_'), classification: 0 }))),
          { nil: undefined },
        ),
      }),
    )
    .map((r) => ({
      inputs: r.inputs,
      binaryOutput: r.binaryOutput,
      ...(r.outputs ? { outputs: r.outputs } : {}),
    }));
  const halfInitArb: fc.Arbitrary<HttpInferRequestInit> = fc
    .tuple(fc.array(fc.float(), { maxLength: 8 }), fc.boolean(), fc.integer({ min: 0, max: 3 }))
    .map(([values, binary, k]) => ({
      inputs: [
        {
          name: 'x',
          tensor: { dtype: 'float32', shape: [values.length], data: Float32Array.from(values) },
          binary,
        },
      ],
      ...(k > 0 ? { outputs: [{ name: 'y', classification: k }] } : {}),
    }));
  /** Encoded bodies from `inits`: as encoded (about half), or with byte edits and header-length lies. */
  const bodiesOf = (
    inits: fc.Arbitrary<HttpInferRequestInit>,
  ): fc.Arbitrary<{ body: Uint8Array; headerLength: string | undefined }> =>
    inits.map(bodyOf).chain(({ body, headerLength }) =>
      fc.oneof(
        fc.constant({ body, headerLength }),
        fc
          .tuple(
            fc.array(mutationArb, { maxLength: 3 }),
            headerLengthArb(headerLength === undefined ? undefined : Number(headerLength), body.byteLength),
          )
          .map(([edits, length]) => ({ body: mutate(body, edits), headerLength: length })),
      ),
    );
  const inferBodyArb = bodiesOf(fc.oneof(echoInitArb, halfInitArb, requestInitArb));
  const controlBodyArb = fc
    .oneof(
      fc.constantFrom(
        '',
        '{}',
        '{"ready": true}',
        '{"ready": "yes"}',
        '{"parameters": {"config": "{}"}}',
        '{"parameters": {"unload_dependents": 1}}',
        '[]',
        'null',
        '{"parameters": []}',
        '{',
        'NaN',
      ),
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
    )
    .map((text) => ({ body: utf8.encode(text), headerLength: undefined }));

  const encodingArb = fc.constantFrom(
    undefined,
    'gzip',
    'deflate',
    'br',
    'gzip, gzip',
    'identity',
    'GZIP',
    'x-unknown',
  );
  /** The body as sent: compressed per the declared encoding, except the lies (1: not compressed, 2: a bomb). */
  const compressed = (body: Uint8Array, encoding: string | undefined, lie: number): Uint8Array => {
    if (lie === 1) return body;
    const gzip = encoding === 'gzip' || encoding === 'GZIP';
    // A bomb: 4 MiB of zeros in ~4 KB, past the 1 MiB decompressed limit.
    const content = lie === 2 && (gzip || encoding === 'deflate') ? Buffer.alloc(4 << 20) : body;
    if (gzip) return gzipSync(content);
    if (encoding === 'deflate') return deflateSync(content);
    return body;
  };

  const ALLOWED = new Set([200, 400, 404, 405, 411, 413, 415, 501, 503]);

  it(
    'kserve-http/api-hostile: every request gets a clear answer (never 500), the server stays up, loads stay in the roots',
    targetOptions('kserve-http/api-hostile', 300_000),
    async (t) => {
      const statuses = new Map<number, number>();
      await fuzzAsync(
        t,
        'kserve-http/api-hostile',
        fc.asyncProperty(
          fc.oneof(
            {
              weight: 2,
              arbitrary: fc.tuple(
                fc.constantFrom('GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'),
                pathArb,
                fc.oneof({ weight: 3, arbitrary: inferBodyArb }, { weight: 1, arbitrary: controlBodyArb }),
              ),
            },
            {
              // Aimed at inference on a served model, where the decoders run.
              weight: 3,
              arbitrary: fc
                .tuple(
                  fc.constant('POST'),
                  fc.constantFrom('', '/versions/1'),
                  fc.oneof(
                    bodiesOf(halfInitArb).map((b) => ['half', b] as const),
                    bodiesOf(echoInitArb).map((b) => ['echo', b] as const),
                  ),
                )
                .map(
                  ([method, version, [model, body]]) =>
                    [method, `/v2/models/${model}${version}/infer`, body] as const,
                ),
            },
          ),
          fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: encodingArb }),
          fc.integer({ min: 0, max: 5 }),
          fc.constantFrom(undefined, 'gzip', 'deflate, gzip', '*', 'identity;q=0', 'br'),
          async ([method, path, { body, headerLength }], encoding, lie, acceptEncoding) => {
            const headers: Record<string, string> = {};
            if (headerLength !== undefined) headers['Inference-Header-Content-Length'] = headerLength;
            if (encoding !== undefined) headers['Content-Encoding'] = encoding;
            if (acceptEncoding !== undefined) headers['Accept-Encoding'] = acceptEncoding;
            if (lie === 3) headers['Content-Type'] = 'application/octet-stream';
            const reply = await send(method, path, headers, compressed(body, encoding, lie));
            statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
            const text = reply.body.toString('utf8');
            if (!ALLOWED.has(reply.status)) {
              throw new Error(
                `${method} ${path}: status ${reply.status}: ${text.slice(0, 300)}\nlog: ${logs.slice(-2).join('\n')}`,
              );
            }
            if (reply.status !== 200 && method !== 'HEAD') {
              const json = JSON.parse(text) as { error?: unknown };
              if (typeof json.error !== 'string' || json.error === '') {
                throw new Error(
                  `${method} ${path}: ${reply.status} without an "error" string: ${text.slice(0, 200)}`,
                );
              }
            }
            if (
              reply.status === 200 &&
              method === 'POST' &&
              /\/infer$/.test(path) &&
              reply.headers['content-encoding'] === undefined
            ) {
              const length = reply.headers['inference-header-content-length'];
              // Our client reads what the server wrote, except 64-bit integers past 2^53 in JSON
              // (exact digits on the wire; a JSON number cannot hold them, so it refuses).
              try {
                decodeHttpInferResponse(reply.body, typeof length === 'string' ? length : undefined);
              } catch (error) {
                if (!(error instanceof Error) || !/JSON cannot carry it exactly/.test(error.message))
                  throw error;
              }
            }
            for (const name of models.keys()) {
              if (!CONFIGURED.includes(name) && name !== 'extra')
                throw new Error(`model "${name}" was loaded`);
            }
          },
        ),
        200,
        () =>
          `; statuses ${[...statuses.entries()]
            .sort((a, b) => a[0] - b[0])
            .map(([s, n]) => `${s}x${n}`)
            .join(' ')}`,
        false,
      );
      const live = await send('GET', '/v2/health/live', {}, new Uint8Array());
      if (live.status !== 200) throw new Error(`server not live after the campaign: ${live.status}`);
      const errors = logs.filter((l) => /"level":"error"/.test(l));
      if (errors.length > 0) throw new Error(`error logs: ${errors.slice(0, 3).join('\n')}`);
    },
  );
});
