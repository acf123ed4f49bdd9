import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root (tests run from packages/cli/dist/test/...). */
export const REPO_ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, '.ci'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('repository root not found');
    dir = parent;
  }
  return dir;
})();

/** ../shared beside the checkout: real models and photos, never committed to the project. */
export const SHARED = join(REPO_ROOT, '..', 'shared');
export const MODELS = join(SHARED, 'models');
export const IMAGES = join(SHARED, 'images');

export function sharedModel(file: string): string {
  return join(MODELS, file);
}

export function image(file: string): Buffer {
  return readFileSync(join(IMAGES, file));
}

export function imagenetLabels(): string[] {
  return readFileSync(join(MODELS, 'imagenet_synset.txt'), 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => l.slice(l.indexOf(' ') + 1));
}

export function argmax(values: ArrayLike<number>, start = 0, length = values.length - start): number {
  let best = start;
  for (let i = start; i < start + length; i++) if (values[i]! > values[best]!) best = i;
  return best - start;
}
