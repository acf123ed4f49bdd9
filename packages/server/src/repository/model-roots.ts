/**
 * Model directories under the model roots (`--model_roots`): the directories a client may
 * name in a load (KServe repository load, by name; SageMaker multi-model, by URL). Every
 * lookup goes through resolveModelLocation, so nothing outside the roots is read, even
 * through symlinks.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { notFound } from '@visionserve/protocol';
import { resolveModelLocation } from './confined-path.js';

/** Names a model directory may have to be found by name (one path segment, no dot-dot). */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$/;

/** Model name -> real directory for every directory directly inside a root (first root wins). */
export async function listModelDirectories(roots: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const root of roots) {
    let names: string[];
    try {
      names = await readdir(root);
    } catch {
      continue;
    }
    for (const name of names.sort()) {
      if (out.has(name) || !MODEL_NAME.test(name)) continue;
      try {
        out.set(name, await resolveModelLocation(join(root, name), roots));
      } catch {
        // Not a directory, or a symlink out of the roots: not a model directory.
      }
    }
  }
  return out;
}

/** The real directory of model `name` in the first root that has it; NOT_FOUND otherwise. */
export async function findModelDirectory(roots: readonly string[], name: string): Promise<string> {
  if (!MODEL_NAME.test(name)) throw notFound(`Invalid model name "${name.slice(0, 64)}"`);
  for (const root of roots) {
    try {
      return await resolveModelLocation(join(root, name), roots);
    } catch {
      // Try the next root.
    }
  }
  throw notFound(`failed to load '${name}': no directory of that name under the model roots`);
}
