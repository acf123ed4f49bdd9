import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configFromEnv } from '../src/config/env.js';
import { FLAG_GROUPS, flagDefault, flagHelpLines, renderConfigurationDoc } from '../src/config/flag-docs.js';
import { FLAGS } from '../src/config/flags.js';

test('every flag is in exactly one group of docs/configuration.md', () => {
  const seen = new Map<string, number>();
  for (const group of FLAG_GROUPS) for (const name of group.flags) seen.set(name, (seen.get(name) ?? 0) + 1);
  for (const name of Object.keys(FLAGS))
    assert.equal(seen.get(name), 1, `--${name} in ${seen.get(name) ?? 0} groups`);
  for (const name of seen.keys()) assert.ok(FLAGS[name], `a group names an unknown flag --${name}`);
});

test('help strings carry no default of their own: defaults come from DEFAULTS', () => {
  for (const [name, spec] of Object.entries(FLAGS)) {
    assert.doesNotMatch(
      spec.help,
      /\(default\b|;\s*default\b/i,
      `--${name} writes its default in its help text`,
    );
  }
  assert.equal(flagDefault(FLAGS['port']!), '8500');
  assert.equal(flagDefault(FLAGS['rest_api_max_body_bytes']!), '256 MiB');
  assert.equal(flagDefault(FLAGS['model_base_path']!), undefined);
  const port = flagHelpLines().find((l) => l.includes('--port '));
  assert.match(port ?? '', /\[default 8500\]$/);
});

test('every environment variable the table names is read by configFromEnv', () => {
  for (const [name, spec] of Object.entries(FLAGS)) {
    if (spec.env === undefined) continue;
    const value = spec.type === 'bool' ? 'true' : spec.type === 'string' ? 'node' : '3';
    const config = configFromEnv({ [spec.env]: value }, 4) as Record<string, unknown>;
    assert.notEqual(config[spec.key], undefined, `--${name}: ${spec.env} sets nothing`);
  }
});

test('the configuration doc names every serve flag', () => {
  const doc = renderConfigurationDoc();
  for (const name of Object.keys(FLAGS)) assert.ok(doc.includes(`\`--${name}\``), `--${name} missing`);
});
