/**
 * Model archives and SageMaker model directories on a real file system: normal archives
 * (made by the system's tar and by hand), and hostile ones: links, path escapes,
 * absolute paths, size and entry limits, truncated and corrupt input.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { extractModelArchive } from '../src/repository/model-archive.js';
import { findSageMakerModels } from '../src/repository/sagemaker-model-dir.js';
import { predictionsAsLines } from '../src/frontends/sagemaker/multi-record.js';

interface Entry {
  readonly name: string;
  readonly type?: '0' | '1' | '2' | '3' | '5' | 'x' | 'L';
  readonly data?: string | Uint8Array;
  readonly link?: string;
  readonly mode?: number;
}

/** A tar archive by hand (ustar headers), so that hostile entries can be written. */
function tar(entries: readonly Entry[], end = true): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const data = typeof e.data === 'string' ? Buffer.from(e.data) : Buffer.from(e.data ?? []);
    const h = Buffer.alloc(512);
    h.write(e.name.slice(0, 100), 0);
    h.write((e.mode ?? 0o644).toString(8).padStart(7, '0') + '\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(data.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write(e.type ?? '0', 156);
    h.write((e.link ?? '').slice(0, 100), 157);
    h.write('ustar\0', 257);
    h.write('00', 263);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  if (end) blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

function pax(records: Record<string, string>): string {
  return Object.entries(records)
    .map(([k, v]) => {
      const body = ` ${k}=${v}\n`;
      let len = body.length + 1;
      while (String(len).length + body.length !== len) len = String(len).length + body.length;
      return `${len}${body}`;
    })
    .join('');
}

async function archiveFile(bytes: Buffer, gzip = true): Promise<{ archive: string; dest: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'vs-archive-'));
  const archive = join(dir, 'model.tar.gz');
  await writeFile(archive, gzip ? gzipSync(bytes) : bytes);
  return { archive, dest: join(dir, 'out') };
}

async function refused(
  bytes: Buffer,
  pattern: RegExp,
  limits?: { maxBytes: number; maxEntries: number },
): Promise<void> {
  const { archive, dest } = await archiveFile(bytes);
  await assert.rejects(extractModelArchive(archive, dest, limits), pattern);
  // Nothing is left behind: no destination, no temporary directory.
  assert.deepEqual(await readdir(join(dest, '..')), ['model.tar.gz']);
}

describe('extractModelArchive', () => {
  it('unpacks what `tar -czf model.tar.gz -C dir .` makes (SageMaker model.tar.gz shape)', async () => {
    const src = await mkdtemp(join(tmpdir(), 'vs-archive-src-'));
    await mkdir(join(src, '1'), { recursive: true });
    await mkdir(join(src, 'code'));
    await writeFile(join(src, '1', 'model.onnx'), 'onnx bytes');
    await writeFile(join(src, 'code', 'inference.mjs'), 'export const handler = () => 1;');
    const dir = await mkdtemp(join(tmpdir(), 'vs-archive-'));
    execFileSync('tar', ['-czf', join(dir, 'model.tar.gz'), '-C', src, '.']);
    const summary = await extractModelArchive(join(dir, 'model.tar.gz'), join(dir, 'out'));
    assert.equal(summary.files, 2);
    assert.equal(await readFile(join(dir, 'out', '1', 'model.onnx'), 'utf8'), 'onnx bytes');
    assert.equal(
      await readFile(join(dir, 'out', 'code', 'inference.mjs'), 'utf8'),
      'export const handler = () => 1;',
    );
  });

  it('reads pax and GNU long names and uncompressed tar; keeps only the owner execute bit', async () => {
    const long = `${'d'.repeat(120)}/model.onnx`;
    const bytes = tar([
      { name: 'PaxHeader', type: 'x', data: pax({ path: long }) },
      { name: 'ignored', data: 'pax' },
      { name: '././@LongLink', type: 'L', data: `${'e'.repeat(130)}/x.sh\0` },
      { name: 'ignored', data: '#!/bin/sh', mode: 0o4777 },
    ]);
    const { archive, dest } = await archiveFile(bytes, false);
    await extractModelArchive(archive, dest);
    assert.equal(await readFile(join(dest, long), 'utf8'), 'pax');
    const mode = (await stat(join(dest, 'e'.repeat(130), 'x.sh'))).mode & 0o7777;
    assert.equal(mode, 0o755);
  });

  it('refuses symbolic and hard links, devices, absolute paths and ".." escapes', async () => {
    await refused(
      tar([{ name: '1/model.onnx', type: '2', link: '/etc/passwd' }]),
      /symbolic link; links are refused/,
    );
    await refused(
      tar([
        { name: 'a', data: 'x' },
        { name: 'b', type: '1', link: 'a' },
      ]),
      /hard link/,
    );
    await refused(tar([{ name: 'dev', type: '3' }]), /not a regular file or directory/);
    await refused(tar([{ name: '/etc/cron.d/x', data: 'x' }]), /refused absolute path/);
    await refused(tar([{ name: '1/../../escape', data: 'x' }]), /leaves the archive/);
    await refused(
      tar([
        { name: 'PaxHeader', type: 'x', data: pax({ path: '../x' }) },
        { name: 'ok', data: 'x' },
      ]),
      /leaves the archive/,
    );
  });

  it('refuses archives over the size or entry limit, truncated and corrupt ones', async () => {
    await refused(tar([{ name: 'big', data: 'x'.repeat(2000) }]), /more than 1000 bytes/, {
      maxBytes: 1000,
      maxEntries: 10,
    });
    await refused(
      tar(Array.from({ length: 5 }, (_, i) => ({ name: `f${i}`, data: 'x' }))),
      /more than 3 entries/,
      { maxBytes: 1000, maxEntries: 3 },
    );
    await refused(tar([{ name: 'a', data: 'x'.repeat(3000) }]).subarray(0, 1500), /truncated/);
    await refused(tar([{ name: 'a', data: 'x' }], false), /truncated/);
    const corrupt = tar([{ name: 'a', data: 'x' }]);
    corrupt[0] = 0x41;
    await refused(corrupt, /checksum/);
    const { archive, dest } = await archiveFile(Buffer.from('not gzip at all'), false);
    await assert.rejects(extractModelArchive(archive, dest), /model archive .*: (corrupt|truncated)/);
    const gz = gzipSync(tar([{ name: 'a', data: 'x'.repeat(5000) }]));
    const cut = await archiveFile(gz.subarray(0, gz.length - 20), false);
    await assert.rejects(extractModelArchive(cut.archive, cut.dest), /model archive/);
  });
});

describe('findSageMakerModels', () => {
  it('finds versions at the top (one model) or several models, skipping code/', async () => {
    const one = await mkdtemp(join(tmpdir(), 'vs-smdir-'));
    await mkdir(join(one, '1'));
    await writeFile(join(one, '1', 'model.onnx'), '');
    await mkdir(join(one, 'code', '1'), { recursive: true });
    await writeFile(join(one, 'code', '1', 'model.onnx'), '');
    assert.deepEqual(await findSageMakerModels(one, 'model'), {
      models: [{ name: 'model', basePath: one }],
      codeDir: join(one, 'code'),
    });
    const many = await mkdtemp(join(tmpdir(), 'vs-smdir-'));
    for (const p of ['b/1', 'a/2', 'nested/c/7', 'empty']) await mkdir(join(many, p), { recursive: true });
    for (const p of ['b/1', 'a/2', 'nested/c/7']) await writeFile(join(many, p, 'model.onnx'), '');
    const found = await findSageMakerModels(many);
    assert.deepEqual(
      found.models.map((m) => m.name),
      ['a', 'b', 'c'],
    );
    assert.equal(found.codeDir, undefined);
  });

  it('counts TensorFlow SavedModel versions (saved_model.pb) as SageMaker TF Serving archives hold them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vs-smdir-'));
    await mkdir(join(dir, 'tf', '1', 'variables'), { recursive: true });
    await writeFile(join(dir, 'tf', '1', 'saved_model.pb'), '');
    await mkdir(join(dir, 'onnx', '3'), { recursive: true });
    await writeFile(join(dir, 'onnx', '3', 'model.onnx'), '');
    await mkdir(join(dir, 'neither', '1'), { recursive: true });
    await writeFile(join(dir, 'neither', '1', 'weights.bin'), '');
    assert.deepEqual(
      (await findSageMakerModels(dir)).models.map((m) => m.name),
      ['onnx', 'tf'],
    );
    const top = await mkdtemp(join(tmpdir(), 'vs-smdir-'));
    await mkdir(join(top, '1'));
    await writeFile(join(top, '1', 'saved_model.pb'), '');
    assert.deepEqual((await findSageMakerModels(top, 'model')).models, [{ name: 'model', basePath: top }]);
  });

  it('reads zero-padded version directories as TF Serving does (<model>/00000123 is a version, not a model)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vs-smdir-'));
    await mkdir(join(dir, 'padded', '00000123', 'variables'), { recursive: true });
    await writeFile(join(dir, 'padded', '00000123', 'saved_model.pb'), '');
    await mkdir(join(dir, 'named', 'v1'), { recursive: true });
    await writeFile(join(dir, 'named', 'v1', 'model.onnx'), '');
    assert.deepEqual((await findSageMakerModels(dir)).models, [
      { name: 'padded', basePath: join(dir, 'padded') },
    ]);
    // In a model.tar.gz too: unpacked, then found the same way.
    const archive = await mkdtemp(join(tmpdir(), 'vs-archive-'));
    execFileSync('tar', ['-czf', join(archive, 'model.tar.gz'), '-C', join(dir, 'padded'), '.']);
    await extractModelArchive(join(archive, 'model.tar.gz'), join(archive, 'out'));
    assert.deepEqual((await findSageMakerModels(join(archive, 'out'), 'model')).models, [
      { name: 'model', basePath: join(archive, 'out') },
    ]);
  });
});

describe('predictionsAsLines', () => {
  it('splits row-format predictions into one {"predictions":[p]} line each, bytes unchanged', () => {
    const text = (s: string): string => Buffer.from(predictionsAsLines(Buffer.from(s))).toString();
    assert.equal(
      text('{"predictions":[1.5,[2,"a,]"],{"k":[3]},NaN]}'),
      '{"predictions":[1.5]}\n{"predictions":[[2,"a,]"]]}\n{"predictions":[{"k":[3]}]}\n{"predictions":[NaN]}',
    );
    assert.equal(
      text('{\n  "predictions": [\n    1,\n    2\n  ]\n}'),
      '{"predictions":[1]}\n{"predictions":[2]}',
    );
    assert.equal(text('{"outputs":{"y":[1,2]}}'), '{"outputs":{"y":[1,2]}}');
    assert.equal(text('{"predictions":["q\\"]"]}'), '{"predictions":["q\\"]"]}');
  });
});
