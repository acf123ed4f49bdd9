import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initialInferenceThreads } from '../src/initial-inference-threads.js';

describe('initialInferenceThreads (spare inference workers started by serve)', () => {
  it('counts --model_instances per model in the config file; one model otherwise', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vs-threads-'));
    try {
      const file = join(dir, 'models.config');
      await writeFile(
        file,
        `# two models
model_config_list {
  config { name: 'a' base_path: '/m/a' model_platform: 'onnx' }
  config {
    name: "b"
    base_path: "/m/b"
    model_version_policy { specific { versions: 1 versions: 2 } }
  }
}
`,
      );
      assert.equal(await initialInferenceThreads({ instances: 2, modelConfigFile: file }), 4);
      assert.equal(await initialInferenceThreads({ instances: 3, modelConfigFile: file }, { max: 5 }), 5);
      assert.equal(await initialInferenceThreads({ instances: 2, modelConfigFile: undefined }), 2);
      await writeFile(file, 'model_config_list { }\n');
      assert.equal(await initialInferenceThreads({ instances: 2, modelConfigFile: file }), 2);
      // Unreadable or malformed: one model's threads (the server reports the file's problem).
      await writeFile(file, 'model_config_list { config { name: "a" ');
      assert.equal(await initialInferenceThreads({ instances: 2, modelConfigFile: file }), 2);
      assert.equal(
        await initialInferenceThreads({ instances: 1, modelConfigFile: join(dir, 'missing.config') }),
        1,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
