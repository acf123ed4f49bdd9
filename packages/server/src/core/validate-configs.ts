import { invalidArgument } from '@visionserve/protocol';
import type { ModelConfig } from './model-config.js';

/**
 * Checks a model config list before anything changes: non-empty and unique names,
 * non-empty base paths, a positive `latest` count, and non-negative integer versions in
 * `specific` policies and labels. Throws INVALID_ARGUMENT naming the model.
 */
export function validateConfigs(configs: readonly ModelConfig[]): void {
  const seen = new Set<string>();
  for (const c of configs) {
    if (c.name === '') throw invalidArgument('Model config has an empty name');
    if (c.basePath === '') throw invalidArgument(`Model config "${c.name}" has an empty base path`);
    if (seen.has(c.name)) {
      throw invalidArgument(`Illegal to list model ${c.name} multiple times in config list`);
    }
    seen.add(c.name);
    const p = c.versionPolicy;
    const versions = p.kind === 'specific' ? p.versions : [];
    if (p.kind === 'latest' && !(Number.isSafeInteger(p.numVersions) && p.numVersions >= 1)) {
      throw invalidArgument(`Model "${c.name}": latest num_versions must be a positive integer`);
    }
    for (const v of [...versions, ...Object.values(c.versionLabels)]) {
      if (!Number.isSafeInteger(v) || v < 0) {
        throw invalidArgument(`Model "${c.name}": invalid version ${String(v)}`);
      }
    }
  }
}
