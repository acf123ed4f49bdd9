#!/usr/bin/env node
// Writes the generated fixture models as a model repository: <dir>/<name>/1/model.onnx.
// Usage: npm run build && node scripts/generate-fixtures.mjs <dir> [name ...]
//   names: half_plus_two, raw_detector (EfficientDet-sized raw outputs), dtype_echo (Identity per
//   KServe datatype), half_plus_two_fp16 (float16 in and out); see packages/cli/src/tools/fixture-models.ts
import { writeFixtureRepository } from '../packages/cli/dist/src/tools/fixture-models.js';

const [dir, ...names] = process.argv.slice(2);
if (dir === undefined) {
  console.error('Usage: node scripts/generate-fixtures.mjs <dir> [name ...]');
  process.exit(2);
}
const written = await writeFixtureRepository(dir, names.length > 0 ? names : undefined);
for (const [name, base] of Object.entries(written)) console.log(`${name}\t${base}`);
