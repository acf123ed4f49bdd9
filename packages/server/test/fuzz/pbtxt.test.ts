/**
 * Fuzz targets: the server's readers of protobuf text format config files (TF Serving's model
 * config list, batching parameters): generated documents in every spelling the format allows
 * read back exactly; mutated and hostile text (deep nesting, broken escapes, huge numbers)
 * fails with INVALID_ARGUMENT only. The parser itself is fuzzed in
 * packages/protocol/test/fuzz/pbtxt.test.ts, label maps and visionserve.json in
 * packages/vision/test/fuzz/asset-files.test.ts.
 */
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { fuzzSync, outcome, targetOptions } from '@visionserve/testkit/campaign';
import {
  type Policy,
  configListArb,
  configTextArb,
  hostileTextArb,
  literal,
  message,
  printConfigs,
  styleArb,
} from '@visionserve/testkit/pbtxt-text';
import {
  defaultBatchingParameters,
  resolveBatchingParameters,
} from '../../src/batching/batching-parameters.js';
import { validateConfigs } from '../../src/core/validate-configs.js';
import { parseBatchingParameters } from '../../src/repository/batching-parameters-file.js';
import { parseModelConfigFile } from '../../src/repository/model-config-file.js';

/** The version policy the server reads from a generated one (TF Serving's defaults). */
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

describe('fuzz: config files in protobuf text format', () => {
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
});
