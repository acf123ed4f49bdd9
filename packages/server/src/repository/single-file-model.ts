import { mkdtemp, rm, stat, symlink, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { MODEL_FILE_NAME } from './list-versions.js';

/** A base path made for a single model file, and how to remove it. */
export interface StagedModelFile {
  readonly basePath: string;
  remove(): Promise<void>;
}

/**
 * When `path` is an `.onnx` file, a temporary base path whose version 1 is that file
 * (`<tmp>/1/model.onnx`, a symbolic link), so `--model_base_path=model.onnx` serves it
 * as is; undefined for anything else.
 */
export async function stageModelFile(path: string): Promise<StagedModelFile | undefined> {
  if (!path.toLowerCase().endsWith('.onnx')) return undefined;
  try {
    if (!(await stat(path)).isFile()) return undefined;
  } catch {
    return undefined;
  }
  const root = await mkdtemp(join(tmpdir(), 'visionserve-model-'));
  await mkdir(join(root, '1'));
  await symlink(resolve(path), join(root, '1', MODEL_FILE_NAME));
  return { basePath: root, remove: () => rm(root, { recursive: true, force: true }) };
}
