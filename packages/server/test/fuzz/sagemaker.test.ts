/**
 * Fuzz targets: the SageMaker-style endpoint's decoders: request bodies (JSON, JSON Lines,
 * CSV) into TF Serving predict bodies, the custom attributes header, Content-Type and
 * Accept negotiation, and the multi-model load body with the model url confinement.
 */
import { after, before, describe, it } from 'node:test';
import type { ServerResponse } from 'node:http';
import { mkdir, mkdtemp, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { Code, parseTfsPredictBody, tfsJsonToTensors } from '@visionserve/protocol';
import {
  csvToPredictBody,
  jsonLinesToPredictBody,
  jsonToPredictBody,
  mediaType,
  negotiateResponse,
  requestKindFor,
} from '../../src/frontends/sagemaker/content-types.js';
import { parseCustomAttributes } from '../../src/frontends/sagemaker/custom-attributes.js';
import { createMultiModelApi } from '../../src/frontends/sagemaker/multi-model-api.js';
import type { HttpContext } from '../../src/frontends/http/http-api.js';
import type { ModelConfig } from '../../src/core/model-config.js';
import { isInside, resolveModelLocation } from '../../src/repository/confined-path.js';
import { silentLogger } from '../../src/util/logger.js';
import { FAKE_SIGNATURE, fakeInferenceService } from '../fakes.js';
import { hostileStringArb, mutatedTextArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, fuzzSync, outcome, outcomeAsync, targetOptions } from '@visionserve/testkit/campaign';

const finite = fc.double({ noNaN: true, noDefaultInfinity: true });

/** Request bodies: valid JSON / JSON Lines / CSV, their mutations, and raw text. */
const bodyTextArb: fc.Arbitrary<string> = mutatedTextArb(
  fc.oneof(
    fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
    fc
      .array(fc.jsonValue({ maxDepth: 2 }), { minLength: 1, maxLength: 4 })
      .map((rows) => rows.map((r) => JSON.stringify(r)).join('\n')),
    fc
      .array(fc.array(finite, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 4 })
      .map((rows) => rows.map((r) => r.join(',')).join('\r\n')),
    fc.constantFrom('[1.0, 2.0, 5.0]', '{"instances": [[1, 2]]}', 'a,"b ""q""",3\n4,5,6', '"unterminated,1'),
  ),
  [
    '\n',
    '\r\n',
    ',',
    '"',
    '""',
    'NaN',
    'inf',
    '-Infinity',
    '{',
    '[',
    '\u0000',
    '𝕏',
    '\uFEFF',
    'nan',
    '1e999',
  ],
);

/** The predict bodies the three decoders produce, through the same JSON-to-tensor path as REST. */
function toTensors(body: unknown): void {
  const parsed = parseTfsPredictBody(body);
  tfsJsonToTensors(parsed.format, parsed.value, { x: { dtype: 'float32' } });
}

describe('fuzz: SageMaker endpoint decoders', () => {
  it(
    'sagemaker/content-decoders: JSON, JSON Lines and CSV bodies become predict bodies or INVALID_ARGUMENT',
    targetOptions('sagemaker/content-decoders'),
    (t) => {
      fuzzSync(
        t,
        'sagemaker/content-decoders',
        fc.property(bodyTextArb, fc.constantFrom('json', 'jsonlines', 'csv'), (text, kind) => {
          const decode =
            kind === 'json'
              ? jsonToPredictBody
              : kind === 'jsonlines'
                ? jsonLinesToPredictBody
                : csvToPredictBody;
          const body = outcome(() => decode(text));
          if (!body.ok) return;
          const value = body.value as Record<string, unknown>;
          if (typeof value !== 'object' || value === null) throw new Error('not an object');
          if (
            kind !== 'json' &&
            (!Array.isArray(value['instances']) || (value['instances'] as unknown[]).length === 0)
          ) {
            throw new Error('no instances');
          }
          outcome(() => {
            toTensors(body.value);
          }, [Code.INVALID_ARGUMENT, Code.UNIMPLEMENTED]);
        }),
        500,
      );
    },
  );

  it(
    'sagemaker/csv-round-trip: a matrix of numbers written as CSV reads back as its rows',
    targetOptions('sagemaker/csv-round-trip'),
    (t) => {
      fuzzSync(
        t,
        'sagemaker/csv-round-trip',
        fc.property(
          fc.array(fc.array(fc.oneof(finite, fc.integer()), { minLength: 1, maxLength: 5 }), {
            minLength: 1,
            maxLength: 5,
          }),
          fc.constantFrom('\n', '\r\n'),
          fc.boolean(),
          (rows, eol, trailing) => {
            const text =
              rows.map((r) => r.map((v) => (Object.is(v, -0) ? '-0' : String(v))).join(',')).join(eol) +
              (trailing ? eol : '');
            const body = csvToPredictBody(text) as { instances: unknown[] };
            const expected = rows.map((r) => (r.length === 1 ? r[0] : r));
            if (JSON.stringify(body.instances) !== JSON.stringify(expected)) {
              throw new Error(`${JSON.stringify(body.instances)} != ${JSON.stringify(expected)}`);
            }
          },
        ),
        300,
      );
    },
  );

  it(
    'sagemaker/jsonlines-round-trip: one JSON value per line reads back as the instances',
    targetOptions('sagemaker/jsonlines-round-trip'),
    (t) => {
      fuzzSync(
        t,
        'sagemaker/jsonlines-round-trip',
        fc.property(
          fc.array(fc.jsonValue({ maxDepth: 3 }), { minLength: 1, maxLength: 6 }),
          fc.constantFrom('\n', '\r\n', '\n\n'),
          (values, eol) => {
            const body = jsonLinesToPredictBody(values.map((v) => JSON.stringify(v)).join(eol)) as {
              instances: unknown[];
            };
            if (JSON.stringify(body.instances) !== JSON.stringify(values))
              throw new Error('instances differ');
          },
        ),
        300,
      );
    },
  );

  it(
    'sagemaker/custom-attributes: the tfs-* pairs are read from any header text; bad ones are INVALID_ARGUMENT',
    targetOptions('sagemaker/custom-attributes'),
    (t) => {
      const name = fc.stringMatching(/^[A-Za-z0-9._-]{1,12}$/);
      const pair = fc.oneof(
        name.map((n) => ({ key: 'tfs-model-name', value: n })),
        fc
          .oneof(fc.nat().map(String), fc.constantFrom('-1', '1.5', 'x', '1e3', '9'.repeat(16)))
          .map((v) => ({ key: 'tfs-model-version', value: v })),
        fc
          .constantFrom('predict', 'classify', 'regress', 'explain')
          .map((v) => ({ key: 'tfs-method', value: v })),
        fc
          .tuple(fc.stringMatching(/^[a-z]{1,6}$/), fc.stringMatching(/^[^,]{0,8}$/))
          .map(([k, v]) => ({ key: `client-${k}`, value: v })),
      );
      fuzzSync(
        t,
        'sagemaker/custom-attributes',
        fc.property(
          fc.oneof(
            fc
              .tuple(fc.array(pair, { maxLength: 5 }), fc.constantFrom(',', ', ', ' ,  '))
              .map(([pairs, sep]) => ({ pairs, text: pairs.map((p) => `${p.key}=${p.value}`).join(sep) })),
            fc
              .oneof(hostileStringArb, fc.string({ unit: 'binary', maxLength: 100 }))
              .map((text) => ({ pairs: undefined, text })),
          ),
          ({ pairs, text }) => {
            const result = outcome(() => parseCustomAttributes(text));
            if (pairs === undefined) return;
            const last = (key: string): string | undefined =>
              pairs
                .filter((p) => p.key === key)
                .at(-1)
                ?.value.trim();
            const version = last('tfs-model-version');
            const method = last('tfs-method');
            const valid =
              (version === undefined || /^\d{1,15}$/.test(version)) &&
              (method === undefined || ['predict', 'classify', 'regress'].includes(method));
            if (valid !== result.ok)
              throw new Error(`valid=${valid} but ${result.ok ? 'accepted' : result.error.message}`);
            if (result.ok) {
              const r = result.value;
              if (
                r.modelName !== last('tfs-model-name') ||
                r.modelVersion !== (version === undefined ? undefined : Number(version)) ||
                r.method !== method
              ) {
                throw new Error(`read ${JSON.stringify(r)}`);
              }
            }
          },
        ),
        500,
      );
    },
  );

  it(
    'sagemaker/accept-and-content-type: negotiation never throws and picks the highest acceptable q',
    targetOptions('sagemaker/accept-and-content-type'),
    (t) => {
      const type = fc.constantFrom(
        'application/json',
        'APPLICATION/JSON',
        'application/jsonlines',
        'application/jsons',
        '*/*',
        'application/*',
        'text/csv',
        'image/png',
        '',
        'application/json+x',
      );
      const q = fc.oneof(
        fc.constant(undefined),
        fc.constantFrom('1', '0', '0.5', '0.001', '1.0', 'abc', '1.2.3', '', '-1'),
      );
      const entry = fc
        .tuple(type, q, fc.constantFrom(';', ' ; ', ';charset=utf-8;'))
        .map(([ty, qv, sep]) => ({ type: ty, q: qv, text: qv === undefined ? ty : `${ty}${sep}q=${qv}` }));
      fuzzSync(
        t,
        'sagemaker/accept-and-content-type',
        fc.property(
          fc.oneof(
            fc
              .array(entry, { maxLength: 5 })
              .map((entries) => ({ entries, text: entries.map((e) => e.text).join(', ') })),
            hostileStringArb.map((text) => ({ entries: undefined, text })),
          ),
          ({ entries, text }) => {
            const chosen = outcome(() => negotiateResponse(text), []);
            outcome(() => requestKindFor(text), []);
            outcome(() => mediaType(text), []);
            if (entries === undefined || !chosen.ok || text.trim() === '') return;
            let best: { kind: string; q: number } | undefined;
            for (const e of entries) {
              const qv = e.q === undefined ? 1 : /^[0-9.]+$/.test(e.q) ? Number(e.q) : 1;
              if (!(qv > 0)) continue;
              const ty = e.type.toLowerCase();
              const kind = ['application/json', '*/*', 'application/*'].includes(ty)
                ? 'json'
                : ['application/jsonlines', 'application/jsons'].includes(ty)
                  ? 'jsonlines'
                  : undefined;
              if (kind !== undefined && (best === undefined || qv > best.q)) best = { kind, q: qv };
            }
            if (chosen.value !== best?.kind)
              throw new Error(`chose ${String(chosen.value)}, expected ${String(best?.kind)}`);
          },
        ),
        500,
      );
    },
  );

  describe('multi-model', () => {
    let root: string;
    let realRoot: string;

    before(async () => {
      root = await mkdtemp(join(tmpdir(), 'vs-fuzz-mm-'));
      realRoot = await realpath(root);
      await mkdir(join(root, 'm', '1'), { recursive: true });
      await mkdir(join(root, 'é x', '2'), { recursive: true });
      await writeFile(join(root, 'file'), 'x');
      await symlink(tmpdir(), join(root, 'out'));
      await symlink(join(root, 'm'), join(root, 'in'));
      await symlink(join(root, 'loop'), join(root, 'loop'));
    });

    after(async () => {
      await rm(root, { recursive: true, force: true });
    });

    const segment = fc.oneof(
      fc.constantFrom(
        'm',
        '1',
        'é x',
        'file',
        'out',
        'in',
        'loop',
        '..',
        '.',
        '',
        '%2e%2e',
        '%2E%2E%2F',
        '%00',
        '\u0000',
        '%',
        '%zz',
        'nope',
        '\\..',
        '~',
        'é%20x',
      ),
      fc.constant('x'.repeat(300)),
      fc.stringMatching(/^[a-z0-9%._-]{1,6}$/),
    );
    const urlArb = fc
      .tuple(
        fc.constantFrom(
          'root',
          'file://root',
          'file://localhost/root',
          'relative',
          '/etc',
          'file:///etc',
          'http://x/root',
          's3://bucket/m',
          'FILE://root',
          'root-sibling',
        ),
        fc.array(segment, { maxLength: 4 }),
        fc.constantFrom('/', '//', '\\', '/./'),
        fc.constantFrom('', '?x=1', '#frag', '/'),
      )
      .map(([prefix, segments, joiner, suffix]) => {
        const base = (r: string): string =>
          prefix.replace('root-sibling', `${r}-x`).replace('root', r).replace('relative', 'm');
        return { build: (r: string) => [base(r), ...segments].join(joiner) + suffix };
      });

    it(
      'sagemaker/model-url: a load url resolves to a directory inside the roots or NOT_FOUND',
      targetOptions('sagemaker/model-url'),
      async (t) => {
        await fuzzAsync(
          t,
          'sagemaker/model-url',
          fc.asyncProperty(urlArb, async ({ build }) => {
            const url = build(root);
            const result = await outcomeAsync(() => resolveModelLocation(url, [root]), [Code.NOT_FOUND]);
            if (!result.ok) return;
            if (!isInside(realRoot, result.value))
              throw new Error(`${url} resolved outside the root: ${result.value}`);
            if (!(await stat(result.value)).isDirectory())
              throw new Error(`${url} resolved to a non-directory`);
          }),
          400,
        );
      },
    );

    it(
      'sagemaker/multi-model-load: any POST /models body loads inside the roots or is refused with a client error',
      targetOptions('sagemaker/multi-model-load'),
      async (t) => {
        const added: ModelConfig[] = [];
        const service = fakeInferenceService({
          resolve: () => ({ version: 1, signature: FAKE_SIGNATURE }),
          run: () => Promise.reject(new Error('not used')),
          status: () => [{ version: 1, state: 'AVAILABLE' }],
          modelNames: () => added.map((c) => c.name),
        });
        const api = createMultiModelApi({
          service,
          registry: {
            modelConfig: (name) => added.find((c) => c.name === name),
            addModel: (config) => {
              added.push(config);
              return Promise.resolve();
            },
            removeModel: (name) => {
              added.splice(
                added.findIndex((c) => c.name === name),
                1,
              );
              return Promise.resolve();
            },
          },
          logger: silentLogger,
          resolveModelLocation: (url) => resolveModelLocation(url, [root]),
          maxModels: 3,
          memoryLimitBytes: 0,
          rssBytes: () => 0,
          loadTimeoutMs: 5_000,
        });
        const bodyArb = mutatedTextArb(
          fc
            .record(
              {
                model_name: fc.oneof(
                  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,8}$/),
                  hostileStringArb,
                  fc.integer(),
                ),
                url: fc.oneof(
                  urlArb.map(({ build }) => build(root)),
                  hostileStringArb,
                  fc.constant(null),
                ),
                extra: fc.jsonValue({ maxDepth: 1 }),
              },
              { requiredKeys: [] },
            )
            .map((b) => JSON.stringify(b)),
          ['"', '{', '}', 'NaN', '\u0000', ',"url":"/etc"'],
        );
        await fuzzAsync(
          t,
          'sagemaker/multi-model-load',
          fc.asyncProperty(bodyArb, async (text) => {
            if (added.length >= 3) added.length = 0;
            let status = 0;
            const res = {
              headersSent: false,
              destroyed: false,
              writeHead(code: number) {
                status = code;
                return res;
              },
              end() {
                return res;
              },
            } as unknown as ServerResponse;
            const ctx = {
              res,
              readBody: () => Promise.resolve(Buffer.from(text, 'utf8')),
            } as unknown as HttpContext;
            const before = added.length;
            const result = await outcomeAsync(
              () => api.load(ctx),
              [Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.ALREADY_EXISTS, Code.RESOURCE_EXHAUSTED],
            );
            if (!result.ok) return;
            if (status !== 200 || added.length !== before + 1) throw new Error(`load answered ${status}`);
            const basePath = added.at(-1)!.basePath;
            if (!isInside(realRoot, basePath)) throw new Error(`loaded outside the root: ${basePath}`);
          }),
          300,
        );
      },
    );
  });
});
