/**
 * Frames of a video file or stream, decoded by ffmpeg, with a policy for a consumer slower
 * than the source: `all` (every frame; the pipe pushes back on ffmpeg, right for files) or
 * `latest` (only the newest frame waits; older ones are dropped and counted, right for live
 * sources, which do not wait).
 */
import {
  type Decoder,
  FFMPEG_MISSING,
  type FfmpegTools,
  type VideoInfo,
  isStreamUrl,
  probeVideo,
  spawnDecoder,
} from './ffmpeg.js';
import { PpmReader, type RgbFrame } from './ppm-reader.js';

export type FramePolicy = 'latest' | 'all';

export interface SourceFrame extends RgbFrame {
  /** 0-based index among the frames decoded (sampled), dropped ones included. */
  readonly index: number;
  /** Seconds from the start of the source. */
  readonly timeS: number;
}

export interface FrameSourceOptions {
  readonly tools: FfmpegTools;
  readonly source: string;
  readonly policy: FramePolicy;
  /** Sample this many frames a second (ffmpeg's fps filter); default every frame. */
  readonly fps?: number | undefined;
  /** The source's own frame rate when known (files), for the times of unsampled frames. */
  readonly sourceFps?: number | undefined;
  /** Seconds (and MB) ffmpeg probes a stream URL before its first frame. Default 1. */
  readonly probeSeconds?: number | undefined;
  /** Frames the `all` policy buffers before it stops reading ffmpeg. Default 2. */
  readonly buffered?: number;
}

export interface FrameSource {
  /** The next frame, undefined at the end; rejects when ffmpeg failed. */
  next(): Promise<SourceFrame | undefined>;
  /** Frames dropped by the `latest` policy so far. */
  readonly dropped: number;
  /** Stops ffmpeg. */
  close(): void;
}

export function openFrameSource(options: FrameSourceOptions): FrameSource {
  const decoder: Decoder = spawnDecoder(options.tools, options.source, options.fps, options.probeSeconds);
  const reader = new PpmReader();
  const queue: SourceFrame[] = [];
  const limit = options.policy === 'latest' ? 1 : Math.max(1, options.buffered ?? 2);
  const rate = options.fps ?? options.sourceFps;
  let decoded = 0;
  let dropped = 0;
  let started: number | undefined;
  let ended = false;
  let failure: Error | undefined;
  let closed = false;
  let wake: (() => void) | undefined;

  const timeOf = (index: number): number => {
    if (rate !== undefined) return index / rate;
    started ??= Date.now();
    return (Date.now() - started) / 1000;
  };
  const notify = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };

  decoder.stdout.on('data', (chunk: Buffer) => {
    let frames: RgbFrame[];
    try {
      frames = reader.push(chunk);
    } catch (error) {
      failure = error as Error;
      decoder.kill('SIGKILL');
      return;
    }
    for (const frame of frames) {
      const index = decoded++;
      queue.push({ ...frame, index, timeS: Math.round(timeOf(index) * 1e6) / 1e6 });
      if (queue.length > limit && options.policy === 'latest') {
        dropped += queue.length - limit;
        queue.splice(0, queue.length - limit);
      }
    }
    if (options.policy === 'all' && queue.length >= limit) decoder.stdout.pause();
    if (frames.length > 0) notify();
  });
  decoder.on('error', (e: NodeJS.ErrnoException) => {
    failure = e.code === 'ENOENT' ? new Error(`${options.tools.ffmpeg}: ${FFMPEG_MISSING}`) : e;
    ended = true;
    notify();
  });
  decoder.on('close', (code, signal) => {
    ended = true;
    if (failure === undefined && !closed && code !== 0) {
      failure = new Error(
        `ffmpeg could not read ${options.source} (${signal ?? `exit ${code}`}): ${decoder.stderrTail()}`,
      );
    }
    notify();
  });

  const next = async (): Promise<SourceFrame | undefined> => {
    for (;;) {
      const frame = queue.shift();
      if (frame !== undefined) {
        if (decoder.stdout.isPaused()) decoder.stdout.resume();
        return frame;
      }
      if (failure !== undefined) throw failure;
      if (ended || closed) return undefined;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  };

  return {
    next,
    get dropped() {
      return dropped;
    },
    close: () => {
      closed = true;
      queue.length = 0;
      if (decoder.exitCode === null) decoder.kill('SIGKILL');
      notify();
    },
  };
}

/** The default policy for a source: `latest` for stream URLs (live), `all` for files. */
export function defaultPolicy(source: string): FramePolicy {
  return isStreamUrl(source) ? 'latest' : 'all';
}

/**
 * Opens a file or stream URL: a file is probed first (its frame rate gives frame times
 * without --fps, its duration the progress); a stream is not (it may not be readable twice).
 */
export async function openVideo(
  tools: FfmpegTools,
  source: string,
  options: { fps?: number | undefined; policy?: FramePolicy | undefined; probeSeconds?: number | undefined },
): Promise<{ frames: FrameSource; info: VideoInfo }> {
  const info = isStreamUrl(source) ? {} : await probeVideo(tools, source);
  const frames = openFrameSource({
    tools,
    source,
    policy: options.policy ?? defaultPolicy(source),
    fps: options.fps,
    sourceFps: info.fps,
    probeSeconds: options.probeSeconds,
  });
  return { frames, info };
}
