import { copyFile, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * ../shared beside the checkout (real models and photos, never committed). Tests run from
 * the repository root (scripts/run-tests.mjs), so it is found from the working directory.
 */
export const SHARED = resolve(process.cwd(), '..', 'shared');

export const sharedModel = (file: string): string => join(SHARED, 'models', file);
export const sharedImage = (file: string): Promise<Buffer> => readFile(join(SHARED, 'images', file));

/** `<tmp>/<name>/<version>/model.onnx` from a file path or bytes; returns the base path. */
export async function stageModel(name: string, version: number, model: string | Uint8Array): Promise<string> {
  const base = join(await mkdtemp(join(tmpdir(), 'vs-model-')), name);
  await mkdir(join(base, String(version)), { recursive: true });
  if (typeof model === 'string') await copyFile(model, join(base, String(version), 'model.onnx'));
  else await writeFile(join(base, String(version), 'model.onnx'), model);
  return base;
}
