import { createHash } from 'node:crypto';
import { mkdir, realpath, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Code, ServingError } from '@visionserve/protocol';
import {
  type ArchiveLimits,
  DEFAULT_ARCHIVE_LIMITS,
  extractModelArchive,
} from '../repository/model-archive.js';
import { type SageMakerModelDir, findSageMakerModels } from '../repository/sagemaker-model-dir.js';
import type { Logger } from '../util/logger.js';
import { type S3Mirror, createS3Mirror } from './s3-mirror.js';
import { type S3Store, createS3Store, isS3Uri, parseS3Uri } from './s3-store.js';

export interface ModelSourcesOptions {
  /** Where S3 copies and unpacked archives live (created on demand; kept across restarts). */
  readonly cacheDir: string;
  readonly logger: Logger;
  /** Limits for unpacking archives. Default: 16 GiB, 100,000 entries. */
  readonly archiveLimits?: ArchiveLimits | undefined;
  /** The S3 store. Default: one from the environment (createS3Store), created on first use. */
  readonly s3?: S3Store | undefined;
}

/**
 * Turns model locations as users give them (local directories, `s3://` prefixes,
 * `model.tar.gz` files locally or in S3) into local directories the model manager reads.
 */
export interface ModelSources {
  /**
   * The local base path for a model location: a local directory as it is; an `s3://`
   * prefix as a local copy (synced once before this resolves, then on every `sync`); a
   * `.tar.gz`/`.tgz`/`.tar` archive unpacked into the cache (once per archive content),
   * whose versions are either at its top or in its one model directory.
   */
  localBasePath(location: string): Promise<string>;
  /** A SageMaker model directory (or an archive / `s3://` copy of one) and the models it holds. */
  modelDirectory(location: string, singleModelName?: string): Promise<SageMakerModelDir>;
  /**
   * Refreshes every `s3://` copy. A failure (bad credentials, missing bucket, network) is
   * logged and leaves the copy as it was, so what was loaded keeps serving. Never rejects.
   */
  sync(): Promise<void>;
}

const ARCHIVE = /\.(tar\.gz|tgz|tar)$/i;

export function isArchivePath(location: string): boolean {
  return ARCHIVE.test(location);
}

const digest = (...parts: string[]): string =>
  createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 24);

export function createModelSources(options: ModelSourcesOptions): ModelSources {
  const { cacheDir, logger } = options;
  const limits = options.archiveLimits ?? DEFAULT_ARCHIVE_LIMITS;
  let s3 = options.s3;
  const store = (): S3Store => (s3 ??= createS3Store());
  const mirrors = new Map<string, Promise<S3Mirror>>();
  const unpacking = new Map<string, Promise<string>>();

  /** Unpacks once per key; concurrent callers share the work, a finished copy is reused. */
  const unpack = (key: string, archive: () => Promise<string>): Promise<string> => {
    let pending = unpacking.get(key);
    if (pending === undefined) {
      pending = (async () => {
        const dest = join(cacheDir, 'unpacked', key);
        try {
          if ((await stat(dest)).isDirectory()) return dest;
        } catch {
          // not unpacked yet
        }
        await mkdir(join(cacheDir, 'unpacked'), { recursive: true });
        const file = await archive();
        const summary = await extractModelArchive(file, dest, limits);
        logger.info('model archive unpacked', { dest, ...summary });
        return dest;
      })();
      pending.catch(() => unpacking.delete(key));
      unpacking.set(key, pending);
    }
    return pending;
  };

  /** A local copy of an archive's contents (local path or s3:// object). */
  const unpackedArchive = async (location: string): Promise<string> => {
    if (isS3Uri(location)) {
      const loc = parseS3Uri(location);
      const head = await store().head(loc);
      if (head === undefined)
        throw new ServingError(Code.NOT_FOUND, `model archive ${location} does not exist`);
      const key = digest(location, head.etag, String(head.size));
      return unpack(key, async () => {
        await mkdir(join(cacheDir, 'archives'), { recursive: true });
        const file = join(cacheDir, 'archives', `${key}.tar.gz`);
        await store().download(loc, file);
        return file;
      });
    }
    let info;
    let real: string;
    try {
      real = await realpath(location);
      info = await stat(real);
    } catch {
      throw new ServingError(Code.NOT_FOUND, `model archive ${location} does not exist`);
    }
    if (!info.isFile())
      throw new ServingError(Code.INVALID_ARGUMENT, `model archive ${location} is not a file`);
    return unpack(digest(real, String(info.size), String(info.mtimeMs)), () => Promise.resolve(real));
  };

  const mirror = (location: string): Promise<S3Mirror> => {
    const key = location.replace(/\/+$/, '');
    let pending = mirrors.get(key);
    if (pending === undefined) {
      pending = (async () => {
        const m = createS3Mirror({
          store: store(),
          location: parseS3Uri(key),
          localPath: join(cacheDir, 's3', digest(key)),
          logger,
        });
        await m.sync();
        return m;
      })();
      pending.catch(() => mirrors.delete(key));
      mirrors.set(key, pending);
    }
    return pending;
  };

  /** A local directory holding the location's contents (not yet interpreted). */
  const localCopy = async (location: string): Promise<string> => {
    if (isArchivePath(location)) return unpackedArchive(location);
    if (isS3Uri(location)) return (await mirror(location)).localPath;
    return location;
  };

  return {
    async localBasePath(location) {
      const dir = await localCopy(location);
      if (!isArchivePath(location)) return dir;
      const found = await findSageMakerModels(dir);
      if (found.models.length === 1) return found.models[0]!.basePath;
      throw new ServingError(
        Code.INVALID_ARGUMENT,
        found.models.length === 0
          ? `model archive ${location} holds no <version>/model.onnx or <version>/saved_model.pb`
          : `model archive ${location} holds ${found.models.length} models (${found.models.map((m) => m.name).join(', ')}); serve it with --sagemaker_model_dir`,
      );
    },
    async modelDirectory(location, singleModelName) {
      return findSageMakerModels(await localCopy(location), singleModelName);
    },
    async sync() {
      for (const [uri, pending] of mirrors) {
        try {
          await (await pending).sync();
        } catch (error) {
          logger.error('s3: sync failed; keeping the models already copied', { uri, error });
        }
      }
    },
  };
}

/** Removes everything the sources cached (tests, `--model_cache_dir` clean-up). */
export async function clearModelCache(cacheDir: string): Promise<void> {
  await rm(cacheDir, { recursive: true, force: true });
}
