import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Code, ServingError } from '@visionserve/protocol';
import {
  createVersionDirectoryIndex,
  listVersionDirectories,
  listVersions,
  parseVersionDirName,
} from '../src/repository/list-versions.js';

void describe('listVersions', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'vs-list-versions-'));
    const model = join(root, 'm');
    for (const v of ['1', '3', '10', 'abc', '2x', '007', '+8', '-9', ' 12', '1e3', '0x1f']) {
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

  void it('lists decimal dirs holding model.onnx, ascending, leading zeros allowed (007 is 7)', async () => {
    assert.deepEqual(await listVersions(join(root, 'm')), [1, 3, 7, 10, 11]);
  });

  void it('maps each version back to its real directory name', async () => {
    assert.equal((await listVersionDirectories(join(root, 'm'))).get(7), '007');
  });

  void it('reads names as TF Serving does: digits only, zero padding allowed', () => {
    assert.equal(parseVersionDirName('00000123'), 123);
    assert.equal(parseVersionDirName('0'), 0);
    assert.equal(parseVersionDirName('000'), 0);
    for (const bad of ['', '+1', '-1', ' 1', '1 ', '1.0', '1e3', '0x10', 'v1', '99999999999999999999']) {
      assert.equal(parseVersionDirName(bad), undefined, bad);
    }
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

  void it('serves zero-padded SavedModel versions (TF Serving testdata layout <base>/00000123)', async () => {
    const base = join(root, 'padded');
    await mkdir(join(base, '00000123', 'variables'), { recursive: true });
    await writeFile(join(base, '00000123', 'saved_model.pb'), 'x');
    const index = createVersionDirectoryIndex(() => assert.fail('no duplicate here'));
    assert.deepEqual(await index.list(base), [123]);
    assert.equal(index.path(base, 123), join(base, '00000123'));
    assert.equal(index.path(join(root, 'never-listed'), 5), join(root, 'never-listed', '5'));
  });

  void it('of two names for one version loads the last in byte order, as TF Serving, and reports it once', async () => {
    const base = join(root, 'dup');
    for (const v of ['1', '001', '0002', '002']) {
      await mkdir(join(base, v), { recursive: true });
      await writeFile(join(base, v, 'model.onnx'), 'x');
    }
    const reported: string[] = [];
    const index = createVersionDirectoryIndex((b, v, kept, ignored) =>
      reported.push(`${v}:${kept}>${ignored}`),
    );
    assert.deepEqual(await index.list(base), [1, 2]);
    assert.deepEqual(await index.list(base), [1, 2]);
    assert.equal(index.path(base, 1), join(base, '1'));
    assert.equal(index.path(base, 2), join(base, '002'));
    assert.deepEqual(reported.sort(), ['1:1>001', '2:002>0002']);
  });
});
