import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { VERSION_MARKER_FILES, indexVersionNames, parseVersionDirName } from '../repository/list-versions.js';
import type { Logger } from '../util/logger.js';
import { type S3Location, type S3Object, type S3Store, formatS3Uri } from './s3-store.js';

/** A local copy of a model base path in S3 (`s3://bucket/prefix` holding `<version>/model.onnx` or `<version>/saved_model.pb`). */
export interface S3Mirror {
  /** The local directory the model manager reads (version directories plus assets). */
  readonly localPath: string;
  /**
   * Lists the prefix once and brings the local copy in line: a version that appeared is
   * downloaded into a temporary directory and renamed into place whole (so the manager only
   * ever sees complete versions), a version that disappeared is removed, and files beside
   * the versions (visionserve.json, labels, code/) are refreshed when their ETag changed.
   * Versions are immutable once copied, as TF Serving treats them. Rejects with the S3
   * error (nothing local changes then); what was copied before stays and keeps serving.
   */
  sync(): Promise<SyncReport>;
}

export interface SyncReport {
  readonly added: number[];
  readonly removed: number[];
  readonly filesUpdated: number;
}

const MANIFEST = '.s3-manifest.json';

interface Manifest {
  /** Relative path of each file beside the versions -> ETag. */
  files: Record<string, string>;
}

/** A key's path below the prefix, or undefined when it cannot be written safely. */
function relativeKey(prefix: string, key: string): string | undefined {
  const rel = key.slice(prefix.length);
  if (rel === '' || rel.endsWith('/')) return undefined;
  const parts = rel.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..' || p.startsWith('.') || p.includes('\\'))) {
    return undefined;
  }
  return parts.join('/');
}

export interface S3MirrorOptions {
  readonly store: S3Store;
  /** The model base path in S3. */
  readonly location: S3Location;
  /** Local directory of the copy; created when missing. */
  readonly localPath: string;
  readonly logger: Logger;
}

export function createS3Mirror(options: S3MirrorOptions): S3Mirror {
  const { store, logger, localPath } = options;
  const prefix =
    options.location.key === '' || options.location.key.endsWith('/')
      ? options.location.key
      : `${options.location.key}/`;
  const at = (key: string): S3Location => ({ bucket: options.location.bucket, key });
  const uri = formatS3Uri(at(prefix));
  let running: Promise<SyncReport> | undefined;

  const readManifest = async (): Promise<Manifest> => {
    try {
      return JSON.parse(await readFile(join(localPath, MANIFEST), 'utf8')) as Manifest;
    } catch {
      return { files: {} };
    }
  };

  /** Downloads version directory `name` (its S3 name, zero padding kept) whole. */
  const downloadVersion = async (name: string, objects: readonly S3Object[]): Promise<void> => {
    const tmp = join(localPath, `.tmp-v${name}-${process.pid}-${Math.random().toString(36).slice(2)}`);
    try {
      for (const o of objects) {
        const rel = relativeKey(`${prefix}${name}/`, o.key);
        if (rel === undefined) continue;
        const target = join(tmp, rel);
        await mkdir(dirname(target), { recursive: true });
        await store.download(at(o.key), target);
      }
      await rename(tmp, join(localPath, name));
    } catch (error) {
      await rm(tmp, { recursive: true, force: true });
      throw error;
    }
  };

  /** Version directory name -> its objects, for the names that are versions and hold a model file. */
  const remoteVersions = (
    objects: readonly S3Object[],
  ): { dirs: Map<string, S3Object[]>; files: Map<string, S3Object> } => {
    const dirs = new Map<string, S3Object[]>();
    const files = new Map<string, S3Object>();
    for (const o of objects) {
      const rel = relativeKey(prefix, o.key);
      if (rel === undefined) continue;
      const first = rel.split('/', 1)[0]!;
      if (parseVersionDirName(first) !== undefined) {
        if (rel === first) continue;
        const list = dirs.get(first) ?? [];
        list.push(o);
        dirs.set(first, list);
      } else files.set(rel, o);
    }
    // A version counts once its model file (model.onnx, or a SavedModel's saved_model.pb) is there: upload it last.
    for (const [name, list] of dirs) {
      if (!list.some((o) => VERSION_MARKER_FILES.some((f) => o.key === `${prefix}${name}/${f}`)))
        dirs.delete(name);
    }
    // Of two names for one version, the one TF Serving would load.
    const kept = new Set(indexVersionNames([...dirs.keys()]).values());
    for (const name of dirs.keys()) if (!kept.has(name)) dirs.delete(name);
    return { dirs, files };
  };

  const syncOnce = async (): Promise<SyncReport> => {
    const objects = await store.list(at(prefix));
    await mkdir(localPath, { recursive: true });
    const { dirs: versions, files } = remoteVersions(objects);
    const local = new Set((await readdir(localPath)).filter((e) => parseVersionDirName(e) !== undefined));
    const added: number[] = [];
    const removed: number[] = [];
    // Assets first, so that a new version loads with the files it came with.
    const manifest = await readManifest();
    let filesUpdated = 0;
    for (const [rel, o] of files) {
      if (manifest.files[rel] === o.etag) continue;
      const target = join(localPath, rel);
      await mkdir(dirname(target), { recursive: true });
      await store.download(at(o.key), target);
      manifest.files[rel] = o.etag;
      filesUpdated++;
    }
    for (const rel of Object.keys(manifest.files)) {
      if (files.has(rel)) continue;
      await rm(join(localPath, rel), { force: true });
      manifest.files = Object.fromEntries(Object.entries(manifest.files).filter(([k]) => k !== rel));
      filesUpdated++;
    }
    if (filesUpdated > 0) {
      await writeFile(join(localPath, `${MANIFEST}.tmp`), JSON.stringify(manifest));
      await rename(join(localPath, `${MANIFEST}.tmp`), join(localPath, MANIFEST));
    }
    const byVersion = (names: Iterable<string>): string[] =>
      [...names].sort((a, b) => parseVersionDirName(a)! - parseVersionDirName(b)!);
    for (const name of byVersion(versions.keys())) {
      if (local.has(name)) continue;
      await downloadVersion(name, versions.get(name)!);
      added.push(parseVersionDirName(name)!);
    }
    for (const name of byVersion(local)) {
      if (versions.has(name)) continue;
      // Renamed away first so that the manager never sees a half-deleted version.
      const trash = join(localPath, `.trash-v${name}-${process.pid}-${Date.now()}`);
      await rename(join(localPath, name), trash);
      await rm(trash, { recursive: true, force: true });
      removed.push(parseVersionDirName(name)!);
    }
    if (added.length > 0 || removed.length > 0 || filesUpdated > 0) {
      logger.info('s3: model copy updated', { uri, added, removed, filesUpdated });
    }
    return { added, removed, filesUpdated };
  };

  return {
    localPath,
    sync() {
      running ??= syncOnce().finally(() => {
        running = undefined;
      });
      return running;
    },
  };
}
