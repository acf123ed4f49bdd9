import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ServingError } from '@visionserve/protocol';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { ModelConfigSchema, ModelServerConfigSchema } from '@visionserve/protocol/tfs-proto';
import { modelConfigsFromMessage, parseModelConfigFile } from '../src/repository/model-config-file.js';

function rejects(text: string, pattern: RegExp): void {
  assert.throws(
    () => parseModelConfigFile(text, '/etc/vs', { source: 'models.config' }),
    (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT && pattern.test(e.message),
  );
}

void describe('parseModelConfigFile', () => {
  void it('parses the TF Serving model_config_list format', () => {
    const configs = parseModelConfigFile(
      `model_config_list {
        config {
          name: 'detector'
          base_path: '/models/detector'
          model_platform: 'onnx'
          model_version_policy { specific { versions: 42 versions: 43 } }
          version_labels { key: 'stable' value: 42 }
          version_labels { key: 'canary' value: 43 }
          logging_config { sampling_config { sampling_rate: 0.01 } }
        }
        config { name: "cls" base_path: "rel/cls" model_version_policy { latest { num_versions: 2 } } }
        config { name: "all" base_path: "/m/all" model_version_policy: { all {} } }
        config { name: "plain", base_path: "/m/plain", model_type: TENSORFLOW }
      }`,
      '/etc/vs',
    );
    assert.deepEqual(configs, [
      {
        name: 'detector',
        basePath: '/models/detector',
        versionPolicy: { kind: 'specific', versions: [42, 43] },
        versionLabels: { stable: 42, canary: 43 },
      },
      {
        name: 'cls',
        basePath: '/etc/vs/rel/cls',
        versionPolicy: { kind: 'latest', numVersions: 2 },
        versionLabels: {},
      },
      { name: 'all', basePath: '/m/all', versionPolicy: { kind: 'all' }, versionLabels: {} },
      {
        name: 'plain',
        basePath: '/m/plain',
        versionPolicy: { kind: 'latest', numVersions: 1 },
        versionLabels: {},
      },
    ]);
  });

  void it('treats latest {} (num_versions 0) as latest 1, and an empty file as no models', () => {
    const [c] = parseModelConfigFile(
      'model_config_list { config { name: "a" base_path: "/a" model_version_policy { latest {} } } }',
      '/',
    );
    assert.deepEqual(c?.versionPolicy, { kind: 'latest', numVersions: 1 });
    assert.deepEqual(parseModelConfigFile('', '/'), []);
    assert.deepEqual(parseModelConfigFile('model_config_list {}', '/'), []);
  });

  void it('rejects bad configs with clear, positioned messages', () => {
    rejects(
      'model_config_list {\n config { name: "a" base_path: "/a" }\n config { name: "a" base_path: "/b" }\n}',
      /^models\.config:3:9: Illegal to list model a multiple times in config list/,
    );
    rejects(
      'model_config_list { config { base_path: "/a" } }',
      /^models\.config:1:28: model config is missing "name"/,
    );
    rejects('model_config_list { config { name: "a" } }', /model config "a" is missing "base_path"/);
    rejects(
      'model_config_list { config { name: "a" base_path: "/a" colour: 1 } }',
      /^models\.config:1:56: Message type "tensorflow\.serving\.ModelConfig" has no field named "colour"/,
    );
    rejects(
      'model_config_list { cfg {} }',
      /^models\.config:1:21: Message type "tensorflow\.serving\.ModelConfigList" has no field named "cfg"/,
    );
    // The same answer as a gRPC reload gets: one mapping for both.
    assert.throws(
      () => parseModelConfigFile('custom_model_config {}', '/'),
      (e: unknown) =>
        e instanceof ServingError && e.code === Code.UNIMPLEMENTED && /not supported/.test(e.message),
    );
    rejects(
      'model_config_list { config { name: "a" base_path: "/a" model_version_policy { latest {} all {} } } }',
      /Field "all" is specified along with field "latest", another member of oneof/,
    );
    rejects(
      'model_config_list { config { name: "a" base_path: "/a" model_version_policy { specific {} } } }',
      /specific policy lists no versions/,
    );
    rejects(
      'model_config_list { config { name: "a" base_path: "/a" model_version_policy { specific { versions: "1" } } } }',
      /^models\.config:1:\d+: Expected integer, got: "1"/,
    );
    rejects(
      'model_config_list { config { name: "a" base_path: "/a" version_labels { key: "x" value: 1 } version_labels { key: "x" value: 2 } } }',
      /Map field "version_labels" has the key "x" more than once/,
    );
    // As in protobuf's text format (and so TF Serving), a map entry without a value holds 0.
    assert.deepEqual(
      parseModelConfigFile(
        'model_config_list { config { name: "a" base_path: "/a" version_labels { key: "x" } } }',
        '/',
      )[0]?.versionLabels,
      { x: 0 },
    );
    rejects('model_config_list { config { name: "a" base_path: "/a" }', /expected "}" before end of input/);
  });
});

void describe('version labels named like Object.prototype members', () => {
  void it('keeps a label "__proto__" from the config file and from a gRPC reload (found by fuzzing)', () => {
    const [config] = parseModelConfigFile(
      'model_config_list { config { name: "a" base_path: "/a" version_labels { key: "__proto__" value: 3 } version_labels { key: "constructor" value: 4 } } }',
      '/etc/vs',
    );
    assert.deepEqual(Object.entries(config!.versionLabels), [
      ['__proto__', 3],
      ['constructor', 4],
    ]);
    const message = create(ModelConfigSchema, { name: 'a', basePath: '/a' });
    Object.defineProperty(message.versionLabels, '__proto__', { value: 3n, enumerable: true });
    const decoded = fromBinary(ModelConfigSchema, toBinary(ModelConfigSchema, message));
    const [reloaded] = modelConfigsFromMessage(
      create(ModelServerConfigSchema, { config: { case: 'modelConfigList', value: { config: [decoded] } } }),
    );
    assert.deepEqual(Object.entries(reloaded!.versionLabels), [['__proto__', 3]]);
  });
});
