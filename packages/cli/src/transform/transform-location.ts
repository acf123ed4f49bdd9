/**
 * Where a transform job reads and writes: a local file or directory, or an `s3://`
 * prefix, as SageMaker Batch Transform's S3Prefix data source and S3OutputPath.
 */
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readFile, readdir, rename, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { type S3Store, isS3Uri, parseS3Uri } from '@visionserve/server';

/** One input file. */
export interface InputFile {
  /** Path below the input location ("a/b.jpg"), also the output's name before ".out". */
  readonly rel: string;
  /** Full location, for messages and the failures manifest. */
  readonly uri: string;
  readonly size: number;
  read(): Promise<Uint8Array>;
}

/** Where outputs go. */
export interface OutputLocation {
  readonly uri: string;
  /** Local directory for unfinished outputs and their checkpoints. */
  readonly stateDir: string;
  /** Names (`<rel>.out`) of the outputs already there. */
  finished(): Promise<Set<string>>;
  /** Publishes a finished output from a local file: renamed into a local output, uploaded to S3. */
  commit(name: string, localFile: string): Promise<void>;
  /** Writes a small file beside the outputs (the failures manifest); returns its location. */
  writeExtra(name: string, body: Uint8Array): Promise<string>;
}

const STATE_DIR = '.transform-state';

function s3Key(prefix: string, name: string): string {
  return prefix === '' || prefix.endsWith('/') ? `${prefix}${name}` : `${prefix}/${name}`;
}

async function walk(dir: string, skip: string | undefined, out: string[]): Promise<void> {
  for (const name of (await readdir(dir)).sort()) {
    if (name.startsWith('.')) continue;
    const path = join(dir, name);
    if (skip !== undefined && (path === skip || path.startsWith(skip + sep))) continue;
    const info = await stat(path);
    if (info.isDirectory()) await walk(path, skip, out);
    else if (info.isFile()) out.push(path);
  }
}

/**
 * The input files, sorted by name. A local file is one input; a local directory is every
 * file below it (hidden ones and the output directory skipped). An `s3://bucket/prefix`
 * is every object whose key starts with the prefix; names are relative to the prefix's
 * last "/" (S3Prefix semantics).
 */
export async function listInputs(uri: string, s3: () => S3Store, outputUri?: string): Promise<InputFile[]> {
  if (isS3Uri(uri)) {
    const location = parseS3Uri(uri);
    const store = s3();
    const base = location.key.slice(0, location.key.lastIndexOf('/') + 1);
    const objects = await store.list(location);
    return objects
      .filter((o) => !o.key.endsWith('/'))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .map((o) => ({
        rel: o.key.slice(base.length),
        uri: `s3://${location.bucket}/${o.key}`,
        size: o.size,
        read: () => store.get({ bucket: location.bucket, key: o.key }),
      }));
  }
  const root = resolve(uri);
  const info = await stat(root);
  const files: string[] = [];
  if (info.isFile()) files.push(root);
  else {
    const skip = outputUri !== undefined && !isS3Uri(outputUri) ? resolve(outputUri) : undefined;
    await walk(root, skip, files);
  }
  return Promise.all(
    files.map(async (path) => ({
      rel: info.isFile() ? relative(dirname(root), path) : relative(root, path).split(sep).join('/'),
      uri: path,
      size: (await stat(path)).size,
      read: () => readFile(path),
    })),
  );
}

/** The output location; `stateDir` defaults to `<output>/.transform-state` locally, a cache directory for S3. */
export function openOutput(uri: string, s3: () => S3Store, stateDir?: string): OutputLocation {
  if (isS3Uri(uri)) {
    const location = parseS3Uri(uri);
    const cache = process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache');
    const state =
      stateDir ??
      join(cache, 'visionserve', 'transform', createHash('sha256').update(uri).digest('hex').slice(0, 16));
    const prefix = location.key;
    return {
      uri,
      stateDir: state,
      async finished() {
        const base = prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`;
        const objects = await s3().list({ bucket: location.bucket, key: base });
        return new Set(objects.map((o) => o.key.slice(base.length)).filter((k) => k.endsWith('.out')));
      },
      async commit(name, localFile) {
        await s3().put({ bucket: location.bucket, key: s3Key(prefix, name) }, await readFile(localFile));
      },
      async writeExtra(name, body) {
        await s3().put({ bucket: location.bucket, key: s3Key(prefix, name) }, body);
        return `s3://${location.bucket}/${s3Key(prefix, name)}`;
      },
    };
  }
  const root = resolve(uri);
  return {
    uri: root,
    stateDir: stateDir ?? join(root, STATE_DIR),
    async finished() {
      const out: string[] = [];
      try {
        await walk(root, join(root, STATE_DIR), out);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
        throw error;
      }
      return new Set(
        out.filter((p) => p.endsWith('.out')).map((p) => relative(root, p).split(sep).join('/')),
      );
    },
    async commit(name, localFile) {
      const target = join(root, name);
      await mkdir(dirname(target), { recursive: true });
      try {
        await rename(localFile, target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
        await copyFile(localFile, `${target}.tmp`);
        await rename(`${target}.tmp`, target);
      }
    },
    async writeExtra(name, body) {
      await mkdir(root, { recursive: true });
      await writeFile(join(root, name), body);
      return join(root, name);
    },
  };
}
