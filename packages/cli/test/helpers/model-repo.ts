import { copyFile, mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway model repository under the OS temp dir. */
export async function tempRepo(prefix = 'vs-repo-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

/**
 * Places a model file as `<root>/<name>/<version>/model.onnx` (`version` may be a directory
 * name such as "00000123"); returns the base path.
 */
export async function placeModel(
  root: string,
  name: string,
  version: number | string,
  model: string | Uint8Array,
): Promise<string> {
  const dir = join(root, name, String(version));
  await mkdir(dir, { recursive: true });
  if (typeof model === 'string') await copyFile(model, join(dir, 'model.onnx'));
  else await writeFile(join(dir, 'model.onnx'), model);
  return join(root, name);
}
