/**
 * Generators of protobuf text format (pbtxt) for the fuzz targets of its parser
 * (packages/protocol), of the label maps (packages/vision) and of the server's config files:
 * every spelling the format allows (quotes, separators, brackets, comments, escapes), TF
 * Serving model_config_list documents, and hostile edits (broken escapes, huge numbers, deep
 * nesting). Not a test file.
 */
import fc from 'fast-check';
import { mutatedTextArb } from './arbitraries.js';

/** Text-format spelling choices: quotes, separators, bracket style, comments. */
export interface Style {
  readonly quote: '"' | "'";
  readonly sep: string;
  readonly open: '{' | '<';
  readonly colonBeforeMessage: boolean;
  readonly comment: boolean;
  readonly escapeNonAscii: 'raw' | 'hex' | 'octal';
}

export const styleArb: fc.Arbitrary<Style> = fc.record({
  quote: fc.constantFrom('"' as const, "'" as const),
  sep: fc.constantFrom(' ', '\n', ', ', '; ', '\t', ' \r\n  '),
  open: fc.constantFrom('{' as const, '<' as const),
  colonBeforeMessage: fc.boolean(),
  comment: fc.boolean(),
  escapeNonAscii: fc.constantFrom('raw' as const, 'hex' as const, 'octal' as const),
});

/** A string literal that reads back as `value` (UTF-8), in the given style. */
export function literal(value: string, style: Style): string {
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

/** A message field `name { body }` in the given style. */
export function message(name: string, body: readonly string[], style: Style): string {
  const close = style.open === '{' ? '}' : '>';
  const comment = style.comment ? ` # ${name} {\n` : ' ';
  return `${name}${style.colonBeforeMessage ? ':' : ''} ${style.open}${comment}${body.join(style.sep)} ${close}`;
}

/** Valid UTF-8 text without lone surrogates. */
export const textArb = (min: number, max: number): fc.Arbitrary<string> =>
  fc.string({ unit: 'grapheme', minLength: min, maxLength: max });

/** A model_version_policy as generated (none, latest with an optional count, all, specific). */
export type Policy =
  | { kind: 'none' }
  | { kind: 'latest'; n: number | undefined }
  | { kind: 'all' }
  | { kind: 'specific'; versions: number[] };

/** One generated `config` entry of a model_config_list. */
export interface GeneratedConfig {
  name: string;
  basePath: string;
  policy: Policy;
  labels: [string, number][];
  platform: boolean;
}

/** Any {@link Policy}, versions up to 2^53-1. */
export const policyArb: fc.Arbitrary<Policy> = fc.oneof(
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

/** A config entry: odd names and paths, a version policy, version labels (some named like Object members). */
export const configArb: fc.Arbitrary<GeneratedConfig> = fc.record({
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

/** A model_config_list document of `configs`; `listSyntax` writes repeated versions as `[a, b]`. */
export function printConfigs(configs: readonly GeneratedConfig[], style: Style, listSyntax: boolean): string {
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

/** 0-3 config entries with distinct names. */
export const configListArb = fc.uniqueArray(configArb, {
  minLength: 0,
  maxLength: 3,
  selector: (c) => c.name,
});

/** model_config_list text in any style. */
export const configTextArb = fc
  .tuple(configListArb, styleArb, fc.boolean())
  .map(([configs, style, list]) => printConfigs(configs, style, list));

/** Pieces spliced into valid text: unbalanced brackets, broken escapes, huge numbers, deep nesting. */
export const HOSTILE_PIECES = [
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
export const deepArb = fc
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

/** `valid` text, mostly with hostile edits and pieces spliced in, sometimes nested very deep. */
export const hostileTextArb = (valid: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 12, arbitrary: mutatedTextArb(valid, HOSTILE_PIECES) },
    { weight: 1, arbitrary: deepArb },
  );
