/**
 * One video through a model: frames from a FrameSource, each sent as a JPEG to `infer`
 * (a few in flight, so that decoding and encoding overlap inference), answers taken in frame
 * order, tracked, written as one JSON line each, optionally drawn into an annotated video.
 */
import { type Tracker, trackInvocationAnswer } from '@visionserve/vision';
import { annotateFrame, encodeJpeg } from './annotate.js';
import type { Encoder } from './ffmpeg.js';
import type { FrameSource, SourceFrame } from './frame-source.js';

/**
 * Frames in flight by default. bench/video-rate.mjs on the project's shared 2-core machine
 * (YOLOX-Nano, 640x426, 300 frames, rounds alternated): 1 in flight was as fast as 2 or faster
 * in 7 of 9 paired rounds (medians 18.6 and 16.3 frames/s): with the cores busy, a second frame
 * only competes with the first; one frame in flight also keeps a live frame's latency lowest.
 */
export const DEFAULT_FRAMES_IN_FLIGHT = 1;

/** A frame's answer: the /invocations answer, an error, or dropped by the server (`latest`). */
export type FrameAnswer =
  | { readonly result: unknown; readonly modelVersion?: string | undefined }
  | { readonly error: { readonly code: string; readonly message: string } }
  | { readonly dropped: true };

/** Sends one encoded frame to the model. Never rejects for a frame's own failure (that is an `error` answer). */
export type FrameInfer = (jpeg: Buffer, frame: number) => Promise<FrameAnswer>;

export interface VideoProgress {
  readonly processed: number;
  readonly dropped: number;
  readonly failed: number;
  readonly framesPerSecond: number;
  /** Seconds into the source of the last frame processed. */
  readonly timeS: number;
}

export interface VideoRunOptions {
  readonly source: FrameSource;
  readonly infer: FrameInfer;
  /** Frames in flight at once (decoded and sent, not yet answered). */
  readonly concurrency: number;
  readonly tracker?: Tracker | undefined;
  /** Receives each output line (JSON, no newline), in frame order. */
  readonly onLine: (line: string) => void | Promise<void>;
  /** Opens the annotated video's encoder once the first frame's size is known. */
  readonly openEncoder?: ((size: { width: number; height: number }) => Encoder) | undefined;
  /** Stop after this many frames processed. */
  readonly maxFrames?: number | undefined;
  readonly signal?: AbortSignal | undefined;
  readonly onProgress?: ((progress: VideoProgress) => void) | undefined;
}

export interface VideoSummary extends VideoProgress {
  readonly wallMs: number;
  readonly interrupted: boolean;
}

interface Answered {
  readonly frame: SourceFrame;
  readonly answer: FrameAnswer;
}

async function answer(frame: SourceFrame, infer: FrameInfer): Promise<Answered> {
  try {
    return { frame, answer: await infer(await encodeJpeg(frame), frame.index) };
  } catch (error) {
    return { frame, answer: { error: { code: 'INTERNAL', message: (error as Error).message } } };
  }
}

/** The JSON line of one answered frame. */
function frameLine(
  frame: SourceFrame,
  answer: FrameAnswer,
  tracker: Tracker | undefined,
): { line: string; result?: unknown } {
  if ('error' in answer)
    return { line: JSON.stringify({ frame: frame.index, time_s: frame.timeS, error: answer.error }) };
  const result =
    tracker === undefined
      ? (answer as { result: unknown }).result
      : trackInvocationAnswer(tracker, (answer as { result: unknown }).result);
  const version = (answer as { modelVersion?: string }).modelVersion;
  return {
    line: JSON.stringify({
      frame: frame.index,
      time_s: frame.timeS,
      ...(version === undefined ? {} : { model_version: version }),
      result,
    }),
    result,
  };
}

export async function runVideo(options: VideoRunOptions): Promise<VideoSummary> {
  const started = Date.now();
  const window: Promise<Answered>[] = [];
  let encoder: Encoder | undefined;
  let size: { width: number; height: number } | undefined;
  let processed = 0;
  let failed = 0;
  let serverDropped = 0;
  let timeS = 0;
  const progress = (): VideoProgress => ({
    processed,
    dropped: options.source.dropped + serverDropped,
    failed,
    framesPerSecond: processed / Math.max(0.001, (Date.now() - started) / 1000),
    timeS,
  });

  const finish = async ({ frame, answer: a }: Answered): Promise<void> => {
    if ('dropped' in a) {
      serverDropped++;
      return;
    }
    if ('error' in a) {
      // A model that cannot answer the first frame will not answer the others: stop with its error.
      if (processed === 0) throw new Error(`${a.error.code}: ${a.error.message}`);
      failed++;
    }
    const { line, result } = frameLine(frame, a, options.tracker);
    processed++;
    timeS = frame.timeS;
    await options.onLine(line);
    if (options.openEncoder !== undefined) {
      size ??= { width: frame.width, height: frame.height };
      if (frame.width !== size.width || frame.height !== size.height) {
        throw new Error(
          `the source changed size at frame ${frame.index} (${size.width}x${size.height} to ${frame.width}x${frame.height}); an annotated video needs one size`,
        );
      }
      encoder ??= options.openEncoder(size);
      await encoder.write(await annotateFrame(frame, result));
    }
    options.onProgress?.(progress());
  };

  try {
    for (;;) {
      if (options.signal?.aborted === true) break;
      if (options.maxFrames !== undefined && processed + window.length >= options.maxFrames) break;
      const frame = await options.source.next();
      if (frame === undefined) break;
      window.push(answer(frame, options.infer));
      if (window.length >= options.concurrency) await finish(await window.shift()!);
    }
    while (window.length > 0) await finish(await window.shift()!);
    await encoder?.finish();
  } catch (error) {
    encoder?.kill();
    throw error;
  } finally {
    options.source.close();
  }
  return { ...progress(), wallMs: Date.now() - started, interrupted: options.signal?.aborted === true };
}
