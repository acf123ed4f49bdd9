/**
 * Video inputs of a transform job: each video file becomes one `<name>.out` of JSON Lines,
 * one line per frame (`visionserve video`'s lines), every frame sent to /invocations as a
 * JPEG. A finished output is skipped on a rerun; an unfinished one starts over.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { FfmpegTools } from '../video/ffmpeg.js';
import { invokeFrameInfer } from '../video/frame-infer.js';
import { openVideo } from '../video/frame-source.js';
import { runVideo } from '../video/video-pipeline.js';
import type { InputFile, OutputLocation } from './transform-location.js';
import type { TransformFailure, TransformInvoke } from './transform-job.js';

const VIDEO_EXTENSIONS = new Set([
  'mp4',
  'm4v',
  'mov',
  'mkv',
  'webm',
  'avi',
  'mpg',
  'mpeg',
  'ts',
  'flv',
  'ogv',
  '3gp',
]);

/** Whether a transform input is a video (by its extension). */
export function isVideoFile(name: string): boolean {
  return VIDEO_EXTENSIONS.has(/\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase() ?? '');
}

export interface VideoTransformOptions {
  readonly inputs: readonly InputFile[];
  readonly output: OutputLocation;
  readonly invoke: TransformInvoke;
  readonly tools: FfmpegTools;
  /** Frames in flight at once. */
  readonly concurrency: number;
  readonly signal?: AbortSignal | undefined;
  readonly onVideoDone?: ((input: InputFile, frames: number) => void) | undefined;
}

export interface VideoTransformSummary {
  readonly filesSkipped: number;
  readonly filesWritten: number;
  readonly filesFailed: number;
  readonly frames: number;
  readonly framesFailed: number;
  readonly failures: TransformFailure[];
  /** Stopped (signal) before every video was done. */
  readonly interrupted: boolean;
}

/** A local path ffmpeg can read: the file itself, or an S3 object copied into the state directory. */
async function localPath(input: InputFile, stateDir: string): Promise<{ path: string; temporary: boolean }> {
  if (!/^s3:\/\//.test(input.uri)) return { path: input.uri, temporary: false };
  const path = join(stateDir, 'videos', input.rel);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, await input.read());
  return { path, temporary: true };
}

/** One video into `<name>.out`; returns frames answered and failed. */
async function transformVideo(
  input: InputFile,
  options: VideoTransformOptions,
): Promise<{ frames: number; failed: number }> {
  const name = `${input.rel}.out`;
  const partial = join(options.output.stateDir, `${name}.partial`);
  await mkdir(dirname(partial), { recursive: true });
  const { path, temporary } = await localPath(input, options.output.stateDir);
  const out = createWriteStream(partial);
  try {
    const { frames } = await openVideo(options.tools, path, { policy: 'all' });
    const summary = await runVideo({
      source: frames,
      infer: invokeFrameInfer(options.invoke),
      concurrency: options.concurrency,
      signal: options.signal,
      onLine: (line) =>
        out.write(`${line}\n`) ? undefined : new Promise<void>((resolve) => out.once('drain', resolve)),
    });
    await new Promise<void>((resolve, reject) =>
      out.end((error?: Error | null) => {
        if (error) reject(error);
        else resolve();
      }),
    );
    if (summary.interrupted) throw new Error('interrupted');
    await options.output.commit(name, partial);
    return { frames: summary.processed, failed: summary.failed };
  } finally {
    out.destroy();
    await rm(partial, { force: true });
    if (temporary) await rm(path, { force: true });
  }
}

export async function transformVideos(options: VideoTransformOptions): Promise<VideoTransformSummary> {
  const aborted = (): boolean => options.signal?.aborted === true;
  const finished = await options.output.finished();
  const failures: TransformFailure[] = [];
  let filesSkipped = 0;
  let filesWritten = 0;
  let frames = 0;
  let framesFailed = 0;
  for (const input of options.inputs) {
    if (aborted()) break;
    if (finished.has(`${input.rel}.out`)) {
      filesSkipped++;
      continue;
    }
    try {
      const done = await transformVideo(input, options);
      frames += done.frames;
      framesFailed += done.failed;
      filesWritten++;
      options.onVideoDone?.(input, done.frames);
    } catch (error) {
      if (aborted()) break;
      failures.push({ input: input.uri, record: 0, status: 0, error: (error as Error).message });
    }
  }
  const interrupted = filesSkipped + filesWritten + failures.length < options.inputs.length;
  return {
    filesSkipped,
    filesWritten,
    filesFailed: failures.length,
    frames,
    framesFailed,
    failures,
    interrupted,
  };
}
