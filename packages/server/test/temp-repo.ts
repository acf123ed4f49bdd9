import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway directory under the OS temp dir. */
export function tempRepo(prefix = 'vs-repo-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}
