/**
 * The seed layout of a SageMaker model archive, in our terms: `1/model.onnx` (MobileNetV2),
 * `code/inference.mjs` and `code/package.json` whose dependency the handler imports
 * (jpeg-js from the npm registry, a pure-JS JPEG decoder: the handler does its own
 * preprocessing, as inference.py handlers do). Used by the deployment and container tests.
 */
import { execFileSync } from 'node:child_process';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sharedModel } from './shared.js';

/**
 * JPEG in, `{"class_id", "score"}` out: decode with the dependency, shorter side to 256
 * (bilinear), centre crop 224, ImageNet normalisation, NCHW float32, `context.predict`,
 * softmax top-1.
 */
export const SEED_HANDLER = `import jpeg from 'jpeg-js';

const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];

export async function handler(data, context) {
  const { width, height, data: rgba } = jpeg.decode(data, { useTArray: true });
  const scale = 256 / Math.min(width, height);
  const w = Math.round(width * scale);
  const h = Math.round(height * scale);
  const left = Math.floor((w - 224) / 2);
  const top = Math.floor((h - 224) / 2);
  const x = new Float32Array(3 * 224 * 224);
  for (let y = 0; y < 224; y++) {
    for (let xo = 0; xo < 224; xo++) {
      const sx = Math.min(width - 1, Math.max(0, (xo + left + 0.5) / scale - 0.5));
      const sy = Math.min(height - 1, Math.max(0, (y + top + 0.5) / scale - 0.5));
      const x0 = Math.floor(sx), y0 = Math.floor(sy);
      const x1 = Math.min(width - 1, x0 + 1), y1 = Math.min(height - 1, y0 + 1);
      const fx = sx - x0, fy = sy - y0;
      for (let c = 0; c < 3; c++) {
        const p = (xx, yy) => rgba[(yy * width + xx) * 4 + c];
        const v = (p(x0, y0) * (1 - fx) + p(x1, y0) * fx) * (1 - fy) + (p(x0, y1) * (1 - fx) + p(x1, y1) * fx) * fy;
        x[c * 224 * 224 + y * 224 + xo] = (v / 255 - MEAN[c]) / STD[c];
      }
    }
  }
  const { output } = await context.predict({ input: { dtype: 'float32', shape: [1, 3, 224, 224], data: x } });
  const logits = Array.from(output.data);
  const max = Math.max(...logits);
  const exp = logits.map((l) => Math.exp(l - max));
  const sum = exp.reduce((a, b) => a + b, 0);
  const best = logits.indexOf(max);
  return [JSON.stringify({ class_id: best, score: exp[best] / sum, decoder: 'jpeg-js' }), 'application/json'];
}
`;

/** Writes the seed layout into `dir` (created); returns `dir`. */
export async function writeSeedModel(dir: string): Promise<string> {
  await mkdir(join(dir, '1'), { recursive: true });
  await copyFile(sharedModel('mobilenetv2-12-int8.onnx'), join(dir, '1', 'model.onnx'));
  await mkdir(join(dir, 'code'), { recursive: true });
  await writeFile(join(dir, 'code', 'inference.mjs'), SEED_HANDLER);
  await writeFile(
    join(dir, 'code', 'package.json'),
    JSON.stringify({ name: 'seed-handler', private: true, dependencies: { 'jpeg-js': '0.4.4' } }, null, 2) +
      '\n',
  );
  return dir;
}

/** `tar -czf archive -C dir .`: the shape SageMaker's model.tar.gz has. */
export function packArchive(dir: string, archive: string): void {
  execFileSync('tar', ['-czf', archive, '-C', dir, '.']);
}
