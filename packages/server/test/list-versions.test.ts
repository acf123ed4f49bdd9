import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Code, ServingError } from '@visionserve/protocol';
import { listVersions } from '../src/repository/list-versions.js';

void describe('listVersions', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'vs-list-versions-'));
    const model = join(root, 'm');
    for (const v of ['1', '3', '10', 'abc', '2x', '007']) {
      await mkdir(join(model, v), { recursive: true });
      await writeFile(join(model, v, 'model.onnx'), 'x');
    }
    await mkdir(join(model, '4')); // no model.onnx
    await mkdir(join(model, '5', 'model.onnx'), { recursive: true }); // a directory, not a file
    await writeFile(join(model, '6'), 'a file, not a dir');
    await symlink(join(model, '10'), join(model, '11'));
    await mkdir(join(root, 'empty'));
    // TensorFlow SavedModel versions count too (converted on load).
    await mkdir(join(root, 'tf', '2', 'variables'), { recursive: true });
    await writeFile(join(root, 'tf', '2', 'saved_model.pb'), 'x');
    await mkdir(join(root, 'tf', '3'), { recursive: true });
    await writeFile(join(root, 'tf', '3', 'saved_model.pbtxt'), 'x');
    await mkdir(join(root, 'tf', '4', 'variables'), { recursive: true });
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  void it('lists canonical numeric dirs holding model.onnx, ascending', async () => {
    assert.deepEqual(await listVersions(join(root, 'm')), [1, 3, 10, 11]);
  });

  void it('lists SavedModel version directories (saved_model.pb or .pbtxt)', async () => {
    assert.deepEqual(await listVersions(join(root, 'tf')), [2, 3]);
  });

  void it('returns an empty list for a base path without versions', async () => {
    assert.deepEqual(await listVersions(join(root, 'empty')), []);
  });

  void it('rejects a missing base path with NOT_FOUND', async () => {
    await assert.rejects(
      listVersions(join(root, 'missing')),
      (e: unknown) =>
        e instanceof ServingError && e.code === Code.NOT_FOUND && /Could not find base path/.test(e.message),
    );
  });
});
