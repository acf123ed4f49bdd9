/**
 * ffmpeg and ffprobe as child processes (Debian's `ffmpeg` package): finding them, reading a
 * source's frame rate, the decoder that turns a file or stream URL into PPM frames on a pipe,
 * and the encoder that turns raw RGB frames into a video file.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { extname } from 'node:path';
import type { Readable } from 'node:stream';

/** Where to find the binaries: VISIONSERVE_FFMPEG / VISIONSERVE_FFPROBE, else on PATH. */
export interface FfmpegTools {
  readonly ffmpeg: string;
  readonly ffprobe: string;
}

export function ffmpegTools(env: NodeJS.ProcessEnv): FfmpegTools {
  return { ffmpeg: env['VISIONSERVE_FFMPEG'] ?? 'ffmpeg', ffprobe: env['VISIONSERVE_FFPROBE'] ?? 'ffprobe' };
}

export const FFMPEG_MISSING =
  "needs ffmpeg, which is not installed: install Debian's ffmpeg package (apt-get install ffmpeg; " +
  'in a checkout scripts/setup-ffmpeg.sh does it) or point VISIONSERVE_FFMPEG and VISIONSERVE_FFPROBE at the binaries';

/** The last bytes a child wrote on stderr, for error messages. */
function stderrTail(child: { stderr: Readable }): () => string {
  let tail = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s: string) => {
    tail = (tail + s).slice(-4000);
  });
  return () => tail.trim().split('\n').slice(-3).join(' | ');
}

/** Runs a tool to its end; resolves with stdout. ENOENT becomes the "install ffmpeg" error. */
function runTool(bin: string, args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    const tail = stderrTail(child);
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (s: string) => (out += s));
    child.on('error', (e: NodeJS.ErrnoException) => {
      reject(e.code === 'ENOENT' ? new Error(`${bin}: ${FFMPEG_MISSING}`) : e);
    });
    child.on('close', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${bin} failed (${signal ?? `exit ${code}`}): ${tail()}`));
    });
  });
}

/** Throws the "install ffmpeg" error unless both binaries run. */
export async function checkFfmpeg(tools: FfmpegTools): Promise<void> {
  await runTool(tools.ffmpeg, ['-hide_banner', '-version'], 10_000);
  await runTool(tools.ffprobe, ['-hide_banner', '-version'], 10_000);
}

/** A URL ffmpeg opens itself (rtsp://, http://, https://, udp://, ...); file:// and paths are files. */
export function isStreamUrl(source: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(source) && !/^file:/i.test(source);
}

export interface VideoInfo {
  /** Frames per second of the first video stream (average), when known. */
  readonly fps?: number;
  /** Seconds, when the container says. */
  readonly duration?: number;
}

function rate(text: unknown): number | undefined {
  if (typeof text !== 'string') return undefined;
  const [n, d] = text.split('/').map(Number);
  const r = d === undefined ? n : n! / d;
  return r !== undefined && Number.isFinite(r) && r > 0 ? r : undefined;
}

/** Frame rate and duration of a file's first video stream (ffprobe); throws if it has none. */
export async function probeVideo(tools: FfmpegTools, file: string): Promise<VideoInfo> {
  const out = await runTool(
    tools.ffprobe,
    [
      '-v',
      'error',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=avg_frame_rate,r_frame_rate:format=duration',
      '-of',
      'json',
      file,
    ],
    60_000,
  );
  const json = JSON.parse(out) as { streams?: Record<string, unknown>[]; format?: { duration?: string } };
  const stream = json.streams?.[0];
  if (stream === undefined) throw new Error(`${file} has no video stream`);
  const duration = Number(json.format?.duration);
  const fps = rate(stream['avg_frame_rate']) ?? rate(stream['r_frame_rate']);
  return {
    ...(fps === undefined ? {} : { fps }),
    ...(Number.isFinite(duration) && duration > 0 ? { duration } : {}),
  };
}

// The decoder and encoder run in their own process groups (`detached`), so that Ctrl-C on a
// terminal reaches only visionserve, which then finishes the frames in flight and closes the
// annotated video itself. They still end with it: the decoder on a closed stdout, the encoder
// on the end of its stdin.

export type Decoder = ChildProcessByStdio<null, Readable, Readable> & { stderrTail(): string };

/**
 * ffmpeg decoding the first video stream of `source` into PPM frames on stdout, `fps` of them
 * a second when given. A stream URL is probed for `probeSeconds` (and at most that many MB).
 */
export function spawnDecoder(
  tools: FfmpegTools,
  source: string,
  fps: number | undefined,
  probeSeconds = 1,
): Decoder {
  const args = ['-hide_banner', '-nostdin', '-loglevel', 'error'];
  // A live source: probe `probeSeconds` (default 1 s) rather than ffmpeg's 5 s before the first frame.
  if (isStreamUrl(source)) {
    args.push(
      '-analyzeduration',
      String(Math.round(probeSeconds * 1e6)),
      '-probesize',
      String(Math.max(32, Math.round(probeSeconds * 1e6))),
    );
  }
  args.push('-i', source, '-map', '0:v:0', '-an', '-sn', '-dn');
  if (fps !== undefined) args.push('-vf', `fps=${fps}`);
  args.push('-f', 'image2pipe', '-c:v', 'ppm', 'pipe:1');
  const child = spawn(tools.ffmpeg, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  return Object.assign(child, { stderrTail: stderrTail(child) });
}

/** Codec arguments for an output file, by its extension. */
function encoderArgs(output: string): string[] {
  switch (extname(output).toLowerCase()) {
    case '.webm':
      return ['-c:v', 'libvpx', '-b:v', '2M', '-deadline', 'realtime', '-cpu-used', '8'];
    default:
      return ['-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p', '-movflags', '+faststart'];
  }
}

export interface Encoder {
  /** Writes one frame of the size given at start (waits when the pipe is full). */
  write(pixels: Buffer): Promise<void>;
  /** Closes the input and waits for ffmpeg to finish the file. */
  finish(): Promise<void>;
  /** Stops ffmpeg (the file is left unfinished). */
  kill(): void;
}

/** ffmpeg encoding raw RGB frames of `width`×`height` at `fps` into `output` (overwritten). */
export function spawnEncoder(
  tools: FfmpegTools,
  output: string,
  size: { width: number; height: number },
  fps: number,
): Encoder {
  const args = [
    '-hide_banner',
    '-nostdin',
    '-loglevel',
    'error',
    '-y',
    '-f',
    'rawvideo',
    '-pix_fmt',
    'rgb24',
    '-s',
    `${size.width}x${size.height}`,
    '-r',
    String(fps),
    '-i',
    'pipe:0',
    // yuv420p needs even sides.
    '-vf',
    'pad=ceil(iw/2)*2:ceil(ih/2)*2',
    ...encoderArgs(output),
    output,
  ];
  const child = spawn(tools.ffmpeg, args, { stdio: ['pipe', 'ignore', 'pipe'], detached: true });
  const tail = stderrTail(child);
  const exited = new Promise<void>((resolve, reject) => {
    child.on('error', (e: NodeJS.ErrnoException) => {
      reject(e.code === 'ENOENT' ? new Error(`${tools.ffmpeg}: ${FFMPEG_MISSING}`) : e);
    });
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`ffmpeg could not write ${output} (${signal ?? `exit ${code}`}): ${tail()}`));
    });
  });
  exited.catch(() => undefined);
  child.stdin.on('error', () => undefined); // an early exit is reported by `exited`
  return {
    write: (pixels) =>
      new Promise<void>((resolve, reject) => {
        if (child.exitCode !== null || child.stdin.destroyed) {
          exited.then(() => {
            reject(new Error(`ffmpeg stopped before ${output} was written`));
          }, reject);
          return;
        }
        if (child.stdin.write(pixels)) resolve();
        else {
          const done = (): void => {
            child.off('close', done);
            resolve();
          };
          child.stdin.once('drain', done);
          child.once('close', done);
        }
      }),
    finish: async () => {
      child.stdin.end();
      await exited;
    },
    kill: () => {
      child.kill('SIGKILL');
    },
  };
}
