/**
 * Fuzz targets: the protobuf text format parser and its three readers (TF Serving's model
 * config list, batching parameters, TF-OD label maps), and visionserve.json: generated
 * documents in every spelling the format allows read back exactly; mutated and hostile
 * text (deep nesting, broken escapes, huge numbers) fails with INVALID_ARGUMENT only.
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parsePbtxt } from '@visionserve/protocol/pbtxt';
import { parseLabelMap, parseLabels, parseVisionConfig } from '@visionserve/vision';
import {
  defaultBatchingParameters,
  resolveBatchingParameters,
} from '../../src/batching/batching-parameters.js';
import { validateConfigs } from '../../src/core/validate-configs.js';
import { parseBatchingParameters } from '../../src/repository/batching-parameters-file.js';
import { parseModelConfigFile } from '../../src/repository/model-config-file.js';
import { mutatedTextArb } from '@visionserve/testkit/arbitraries';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';

/** Text-format spelling choices: quotes, separators, bracket style, comments. */
interface Style {
  readonly quote: '"' | "'";
  readonly sep: string;
  readonly open: '{' | '<';
  readonly colonBeforeMessage: boolean;
  readonly comment: boolean;
  readonly escapeNonAscii: 'raw' | 'hex' | 'octal';
}

const styleArb: fc.Arbitrary<Style> = fc.record({
  quote: fc.constantFrom('"' as const, "'" as const),
  sep: fc.constantFrom(' ', '\n', ', ', '; ', '\t', ' \r\n  '),
  open: fc.constantFrom('{' as const, '<' as const),
  colonBeforeMessage: fc.boolean(),
  comment: fc.boolean(),
  escapeNonAscii: fc.constantFrom('raw' as const, 'hex' as const, 'octal' as const),
});

/** A string literal that reads back as `value` (UTF-8), in the given style. */
function literal(value: string, style: Style): string {
  let out = style.quote;
  for (const ch of value) {
    const cp = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === style.quote) out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (cp < 0x80 || style.escapeNonAscii === 'raw') out += ch;
    else {
      for (const b of Buffer.from(ch, 'utf8')) {
        out +=
          style.escapeNonAscii === 'hex' ? `\\x${b.toString(16)}` : `\\${b.toString(8).padStart(3, '0')}`;
      }
    }
  }
  return out + style.quote;
}

function message(name: string, body: readonly string[], style: Style): string {
  const close = style.open === '{' ? '}' : '>';
  const comment = style.comment ? ` # ${name} {\n` : ' ';
  return `${name}${style.colonBeforeMessage ? ':' : ''} ${style.open}${comment}${body.join(style.sep)} ${close}`;
}

/** Valid UTF-8 text without lone surrogates. */
const textArb = (min: number, max: number): fc.Arbitrary<string> =>
  fc.string({ unit: 'grapheme', minLength: min, maxLength: max });

type Policy =
  | { kind: 'none' }
  | { kind: 'latest'; n: number | undefined }
  | { kind: 'all' }
  | { kind: 'specific'; versions: number[] };

interface GeneratedConfig {
  name: string;
  basePath: string;
  policy: Policy;
  labels: [string, number][];
  platform: boolean;
}

const policyArb: fc.Arbitrary<Policy> = fc.oneof(
  fc.constant({ kind: 'none' as const }),
  fc.record({
    kind: fc.constant('latest' as const),
    n: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
  }),
  fc.constant({ kind: 'all' as const }),
  fc.record({
    kind: fc.constant('specific' as const),
    versions: fc.array(fc.oneof(fc.nat(1000), fc.constant(Number.MAX_SAFE_INTEGER)), {
      minLength: 1,
      maxLength: 4,
    }),
  }),
);

const configArb: fc.Arbitrary<GeneratedConfig> = fc.record({
  name: textArb(1, 8),
  basePath: textArb(1, 12).map((p) => `/models/${p}`),
  policy: policyArb,
  labels: fc.uniqueArray(
    fc.tuple(
      fc.oneof(textArb(1, 6), fc.constantFrom('stable', 'canary', 'constructor', 'toString', '__proto__')),
      fc.nat(50),
    ),
    {
      maxLength: 3,
      selector: ([k]) => k,
    },
  ),
  platform: fc.boolean(),
});

function printConfigs(configs: readonly GeneratedConfig[], style: Style, listSyntax: boolean): string {
  const int = (n: number): string => String(n);
  const entries = configs.map((c) => {
    const body = [`name: ${literal(c.name, style)}`, `base_path: ${literal(c.basePath, style)}`];
    if (c.platform) body.push(`model_platform: ${literal('onnx', style)}`);
    const p = c.policy;
    if (p.kind === 'latest')
      body.push(
        message(
          'model_version_policy',
          [message('latest', p.n === undefined ? [] : [`num_versions: ${int(p.n)}`], style)],
          style,
        ),
      );
    if (p.kind === 'all') body.push(message('model_version_policy', [message('all', [], style)], style));
    if (p.kind === 'specific') {
      const versions = listSyntax
        ? [`versions: [${p.versions.map(int).join(', ')}]`]
        : p.versions.map((v) => `versions: ${int(v)}`);
      body.push(message('model_version_policy', [message('specific', versions, style)], style));
    }
    for (const [key, value] of c.labels)
      body.push(message('version_labels', [`key: ${literal(key, style)}`, `value: ${int(value)}`], style));
    return message('config', body, style);
  });
  return message('model_config_list', entries, style);
}

function expectedPolicy(p: Policy): unknown {
  switch (p.kind) {
    case 'none':
      return { kind: 'latest', numVersions: 1 };
    case 'latest':
      return { kind: 'latest', numVersions: Math.max(p.n ?? 0, 1) };
    case 'all':
      return { kind: 'all' };
    case 'specific':
      return { kind: 'specific', versions: [...new Set(p.versions)] };
  }
}

const configListArb = fc.uniqueArray(configArb, { minLength: 0, maxLength: 3, selector: (c) => c.name });

const configTextArb = fc
  .tuple(configListArb, styleArb, fc.boolean())
  .map(([configs, style, list]) => printConfigs(configs, style, list));

/** Pieces spliced into valid text: unbalanced brackets, broken escapes, huge numbers, deep nesting. */
const HOSTILE_PIECES = [
  '{',
  '}',
  '<',
  '>',
  '[',
  ']',
  ':',
  '"',
  "'",
  '\\',
  '\\x',
  '\\u12',
  '\\U0011ffff',
  '\\777',
  '#',
  '0x',
  '0x1fffffffffffffffff',
  '99999999999999999999999',
  '1e999',
  '-',
  '-inf',
  'nan',
  '08',
  '[a.b/c]',
  '\u0000',
  '\uD800',
  '𝕏',
  'a { '.repeat(50),
];

/** Text nested `depth` levels deep in one of the ways the grammar allows. */
const deepArb = fc
  .tuple(fc.integer({ min: 1, max: 60_000 }), fc.constantFrom('brace', 'angle', 'list', 'colon'))
  .map(([depth, kind]) => {
    switch (kind) {
      case 'brace':
        return `${'a {'.repeat(depth)}${'}'.repeat(depth)}`;
      case 'angle':
        return `${'a <'.repeat(depth)}${'>'.repeat(depth)}`;
      case 'list':
        return `${'a: [{'.repeat(depth)}${'}]'.repeat(depth)}`;
      default:
        return `${'a: {'.repeat(depth)}${'}'.repeat(depth)}`;
    }
  });

const hostileTextArb = (valid: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 12, arbitrary: mutatedTextArb(valid, HOSTILE_PIECES) },
    { weight: 1, arbitrary: deepArb },
  );

describe('fuzz: protobuf text format and config files', () => {
  it(
    'pbtxt/model-config-round-trip: generated model_config_list files read back exactly',
    targetOptions('pbtxt/model-config-round-trip'),
    (t) => {
      fuzzSync(
        t,
        'pbtxt/model-config-round-trip',
        fc.property(configListArb, styleArb, fc.boolean(), (configs, style, list) => {
          const text = printConfigs(configs, style, list);
          const parsed = parseModelConfigFile(text, '/cfg');
          const expected = configs.map((c) => ({
            name: c.name,
            basePath: c.basePath,
            versionPolicy: expectedPolicy(c.policy),
            versionLabels: Object.fromEntries(c.labels),
          }));
          const a = JSON.stringify(
            parsed.map((p) => ({ ...p, versionLabels: Object.entries(p.versionLabels) })),
          );
          const b = JSON.stringify(
            expected.map((p) => ({ ...p, versionLabels: Object.entries(p.versionLabels) })),
          );
          if (a !== b) throw new Error(`parsed ${a}\nexpected ${b}\n${text}`);
          validateConfigs(parsed);
        }),
        300,
      );
    },
  );

  it(
    'pbtxt/model-config-hostile: mutated config files parse, or fail with INVALID_ARGUMENT, and validate the same way',
    targetOptions('pbtxt/model-config-hostile'),
    (t) => {
      fuzzSync(
        t,
        'pbtxt/model-config-hostile',
        fc.property(hostileTextArb(configTextArb), (text) => {
          const parsed = outcome(() => parseModelConfigFile(text, '/cfg'));
          if (parsed.ok)
            outcome(() => {
              validateConfigs(parsed.value);
            });
        }),
        500,
      );
    },
  );

  it(
    'pbtxt/batching-parameters: generated files read back; mutated ones fail with INVALID_ARGUMENT only',
    targetOptions('pbtxt/batching-parameters'),
    (t) => {
      const fields = fc.record(
        {
          max_batch_size: fc.integer({ min: -2, max: 512 }),
          batch_timeout_micros: fc.integer({ min: -1, max: 10_000_000 }),
          max_enqueued_batches: fc.integer({ min: 0, max: 100 }),
          num_batch_threads: fc.integer({ min: 0, max: 16 }),
          thread_pool_name: fc.string({ maxLength: 8 }),
          enable_large_batch_splitting: fc.boolean(),
          max_execution_batch_size: fc.integer({ min: 0, max: 512 }),
          allowed_batch_sizes: fc.array(fc.integer({ min: 0, max: 64 }), { maxLength: 4 }),
          pad_variable_length_inputs: fc.boolean(),
        },
        { requiredKeys: [] },
      );
      const print = fc.tuple(fields, styleArb, fc.boolean(), fc.boolean()).map(([f, style, wrap, list]) => {
        const parts: string[] = [];
        for (const [name, value] of Object.entries(f)) {
          if (name === 'allowed_batch_sizes') {
            const sizes = value as number[];
            if (list) parts.push(`allowed_batch_sizes: [${sizes.join(', ')}]`);
            else for (const s of sizes) parts.push(`allowed_batch_sizes: ${s}`);
            continue;
          }
          const scalar = typeof value === 'string' ? literal(value, style) : String(value);
          if (name === 'pad_variable_length_inputs' || !wrap) parts.push(`${name}: ${scalar}`);
          else parts.push(message(name, [`value: ${scalar}`], style));
        }
        return { fields: f, text: parts.join(style.sep) };
      });
      fuzzSync(
        t,
        'pbtxt/batching-parameters',
        fc.property(
          fc.oneof(
            print,
            hostileTextArb(print.map((p) => p.text)).map((text) => ({ fields: undefined, text })),
          ),
          ({ fields: f, text }) => {
            const parsed = outcome(() => parseBatchingParameters(text));
            if (f !== undefined) {
              if (!parsed.ok) throw new Error(`generated file refused: ${parsed.error.message}\n${text}`);
              const v = parsed.value;
              const same =
                v.maxBatchSize === f.max_batch_size &&
                v.batchTimeoutMicros === f.batch_timeout_micros &&
                v.threadPoolName === f.thread_pool_name &&
                v.enableLargeBatchSplitting === f.enable_large_batch_splitting &&
                v.padVariableLengthInputs === f.pad_variable_length_inputs &&
                JSON.stringify(v.allowedBatchSizes ?? []) === JSON.stringify(f.allowed_batch_sizes ?? []);
              if (!same) throw new Error(`read ${JSON.stringify(v)} from\n${text}`);
            }
            if (parsed.ok)
              outcome(() => resolveBatchingParameters(defaultBatchingParameters(2), [parsed.value]));
          },
        ),
        400,
      );
    },
  );

  it(
    'pbtxt/label-map: generated TF-OD label maps read back; mutated ones fail with INVALID_ARGUMENT only',
    targetOptions('pbtxt/label-map'),
    (t) => {
      const items = fc.uniqueArray(
        fc.record({
          id: fc.integer({ min: -5, max: 100_000 }),
          name: textArb(0, 8),
          display: fc.option(textArb(0, 8), { nil: undefined }),
          extra: fc.boolean(),
        }),
        { minLength: 1, maxLength: 5, selector: (i) => i.id },
      );
      const print = fc.tuple(items, styleArb).map(([list, style]) => ({
        items: list,
        text: list
          .map((i) =>
            message(
              'item',
              [
                `name: ${literal(i.name, style)}`,
                `id: ${i.id}`,
                ...(i.display === undefined ? [] : [`display_name: ${literal(i.display, style)}`]),
                ...(i.extra ? ['keypoints { id: 0 label: "nose" }', 'frequency: FREQUENT'] : []),
              ],
              style,
            ),
          )
          .join(style.sep),
      }));
      fuzzSync(
        t,
        'pbtxt/label-map',
        fc.property(
          fc.oneof(
            print,
            hostileTextArb(print.map((p) => p.text)).map((text) => ({ items: undefined, text })),
          ),
          ({ items: list, text }) => {
            const parsed = outcome(() => parseLabelMap(text));
            outcome(() => parseLabels(text, 'labels.pbtxt'));
            outcome(() => parseLabels(text, 'labels.txt'));
            if (list === undefined) return;
            if (!parsed.ok) throw new Error(`generated label map refused: ${parsed.error.message}\n${text}`);
            for (const i of list) {
              if (parsed.value.get(i.id) !== (i.display ?? i.name))
                throw new Error(`id ${i.id} read as ${parsed.value.get(i.id)}`);
            }
          },
        ),
        400,
      );
    },
  );

  it(
    'pbtxt/generic: strings with every escape read back; any text parses or fails with INVALID_ARGUMENT',
    targetOptions('pbtxt/generic'),
    (t) => {
      fuzzSync(
        t,
        'pbtxt/generic',
        fc.property(
          fc.oneof(
            fc
              .tuple(fc.string({ unit: 'grapheme', maxLength: 20 }), styleArb)
              .map(([value, style]) => ({ value, text: `s: ${literal(value, style)}` })),
            hostileTextArb(configTextArb).map((text) => ({ value: undefined, text })),
            fc.string({ unit: 'binary', maxLength: 80 }).map((text) => ({ value: undefined, text })),
          ),
          ({ value, text }) => {
            const parsed = outcome(() => parsePbtxt(text));
            if (value === undefined) return;
            const field = parsed.ok ? parsed.value.fields[0] : undefined;
            if (field?.value.kind !== 'string' || field.value.value !== value) {
              throw new Error(
                `${JSON.stringify(value)} written as ${text} read back as ${JSON.stringify(field?.value)}`,
              );
            }
          },
        ),
        500,
      );
    },
  );

  it(
    'vision-config/hostile: visionserve.json values parse into a config or fail with INVALID_ARGUMENT',
    targetOptions('vision-config/hostile'),
    (t) => {
      const number = fc.oneof(
        fc.integer({ min: -10, max: 5000 }),
        fc.double(),
        fc.constantFrom(0, 1e9, 2 ** 31, -1, 0.5),
      );
      const image = fc.record(
        {
          preset: fc.constantFrom('imagenet', 'tfod', 'yolox', 'mnist', 'nope', 1),
          width: number,
          height: number,
          resize: fc.constantFrom('stretch', 'crop', 'letterbox', 'fill', 3),
          resizeShorter: number,
          padValue: number,
          layout: fc.constantFrom('NCHW', 'NHWC', 'CHW'),
          dtype: fc.constantFrom('float32', 'uint8', 'int64'),
          channelOrder: fc.constantFrom('RGB', 'BGR', 'RGBA'),
          channels: fc.constantFrom(1, 3, 4, 0),
          scale: number,
          mean: fc.array(number, { maxLength: 4 }),
          std: fc.array(number, { maxLength: 4 }),
          maxInputPixels: number,
          input: fc.string({ maxLength: 5 }),
        },
        { requiredKeys: [] },
      );
      const post = fc.record(
        {
          kind: fc.constantFrom('classification', 'detection', 'segmentation'),
          labels: fc.constantFrom('labels.txt', '../x', '/etc/passwd', ''),
          labelsFormat: fc.constantFrom('lines', 'synset', 'label_map', 'csv'),
          labelOffset: number,
          topK: number,
          scoreThreshold: number,
          maxDetections: number,
          output: fc.string({ maxLength: 5 }),
        },
        { requiredKeys: [] },
      );
      const config = fc.oneof(
        fc.record({ image, postprocess: post }, { requiredKeys: [] }),
        fc.jsonValue({ maxDepth: 3 }),
        fc.record(
          {
            image: fc.jsonValue({ maxDepth: 2 }),
            postprocess: fc.jsonValue({ maxDepth: 2 }),
            extra: fc.jsonValue({ maxDepth: 1 }),
          },
          { requiredKeys: [] },
        ),
      );
      fuzzSync(
        t,
        'vision-config/hostile',
        fc.property(config, (json) => {
          outcome(() => parseVisionConfig(json));
        }),
        500,
      );
    },
  );
});
