import { type RunningVisionServer, type ServerConfig } from '@visionserve/server';
import { type Tracker, type TrackerConfig, createTracker } from '@visionserve/vision';
import { type Command, UsageError, createProgress } from './cli-args.js';
import { splitServerArgs, startInProcessServer } from './server-args.js';
import { checkFfmpeg, ffmpegTools, spawnEncoder } from './video/ffmpeg.js';
import { inProcessFrameInfer, openFrameStream } from './video/frame-infer.js';
import { type FramePolicy, defaultPolicy, openVideo } from './video/frame-source.js';
import {
  DEFAULT_FRAMES_IN_FLIGHT,
  type FrameInfer,
  type VideoProgress,
  runVideo,
} from './video/video-pipeline.js';

export const VIDEO_HELP = `Usage: visionserve video SOURCE [options] [server flags]

Runs a model on the frames of a video file (MP4, WebM, MKV, MOV, ...) or a stream URL
(rtsp://, http(s):// including HLS .m3u8, udp://, ...), decoded by ffmpeg (Debian's ffmpeg
package). Prints one JSON line per processed frame on stdout:
  {"frame": 0, "time_s": 0, "result": <what /invocations answers for the frame as a JPEG>}
(a detection model's boxes carry "track_id" when tracking is on); a frame the model failed
on prints {"frame", "time_s", "error": {"code", "message"}}. Progress and frames/s on stderr.
In-process by default (give the model with the serve flags, e.g. --model_base_path), or
against a running server's WebSocket frame stream with --endpoint.

Options:
  --fps N              sample N frames a second (default: every frame)
  --model NAME         the model (default: the in-process server's default; "default" with --endpoint)
  --model-version N    a version of it (with --endpoint; default the latest)
  --endpoint URL       a running server's REST port, e.g. http://127.0.0.1:8501
  --output FILE        also write the video with boxes and labels drawn (.mp4, .mkv or .webm)
  --policy latest|all  when the model is slower than the source: process the newest frame and
                       drop older ones (latest), or every frame (all). Default: latest for stream
                       URLs, all for files
  --track auto|on|off  object tracking of detections: auto follows the model's visionserve.json
                       "tracking" (off with --endpoint), on uses it or the defaults (default auto)
  --concurrency N      frames in flight at once (default 1; more overlap decoding with inference
                       where cores are idle, which they were not on the 2-core test machine)
  --max-frames N       stop after N frames processed
  --probe-seconds S    how long ffmpeg probes a stream URL before its first frame (default 1:
                       with ffmpeg's own 5 s, a 6 s live test stream at --fps 5 lost 20 of its
                       30 frames to the latest policy; with 1 s, 1)

Exit codes: 0 every frame answered, 1 some frame failed or the run stopped on an error,
2 usage error, 130 interrupted. ffmpeg and ffprobe are found on PATH, or through
VISIONSERVE_FFMPEG and VISIONSERVE_FFPROBE.
`;

const OPTIONS = new Set([
  'fps',
  'model',
  'model-version',
  'endpoint',
  'output',
  'policy',
  'track',
  'concurrency',
  'max-frames',
  'probe-seconds',
]);

function positiveNumber(options: Map<string, string>, name: string, integer: boolean): number | undefined {
  const v = options.get(name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new UsageError(`--${name} expects a positive ${integer ? 'integer' : 'number'}, got "${v}"`);
  }
  return n;
}

function choice<T extends string>(
  options: Map<string, string>,
  name: string,
  values: readonly T[],
): T | undefined {
  const v = options.get(name);
  if (v === undefined) return undefined;
  if (!(values as readonly string[]).includes(v))
    throw new UsageError(`--${name} expects ${values.join('|')}, got "${v}"`);
  return v as T;
}

/** The tracking config of a model served in process (its visionserve.json), if any. */
async function modelTracking(server: RunningVisionServer, name: string): Promise<TrackerConfig | undefined> {
  try {
    return await server.service.withServable({ name }, (s) =>
      Promise.resolve(s.assets.vision.config?.tracking),
    );
  } catch {
    return undefined;
  }
}

function trackerFor(mode: 'auto' | 'on' | 'off', config: TrackerConfig | undefined): Tracker | undefined {
  if (mode === 'off' || (mode === 'auto' && config === undefined)) return undefined;
  return createTracker(config ?? {});
}

interface Target {
  readonly infer: FrameInfer;
  readonly tracking: TrackerConfig | undefined;
  close(): Promise<void>;
}

async function openTarget(
  options: Map<string, string>,
  serverArgs: readonly string[],
  env: NodeJS.ProcessEnv,
  policy: FramePolicy,
): Promise<Target> {
  const endpoint = options.get('endpoint');
  const model = options.get('model');
  if (endpoint !== undefined) {
    if (serverArgs.length > 0)
      throw new UsageError(`server flags (${serverArgs[0]}) make no sense with --endpoint`);
    const stream = await openFrameStream({
      endpoint,
      model: model ?? 'default',
      version: positiveNumber(options, 'model-version', true),
      policy,
    });
    return { infer: stream.infer, tracking: undefined, close: () => stream.close() };
  }
  if (options.has('model-version')) throw new UsageError('--model-version needs --endpoint');
  const { server, config }: { server: RunningVisionServer; config: ServerConfig } =
    await startInProcessServer(serverArgs, env);
  const name = model ?? config.modelName;
  return {
    infer: inProcessFrameInfer(server, model === undefined ? '' : `tfs-model-name=${model}`),
    tracking: await modelTracking(server, name),
    close: () => server.close(),
  };
}

function progressText(p: VideoProgress, duration: number | undefined): string {
  const where =
    duration === undefined
      ? `t=${p.timeS.toFixed(1)} s`
      : `${Math.min(100, (100 * p.timeS) / duration).toFixed(0)}% of ${duration.toFixed(1)} s`;
  return `frames ${p.processed} (${p.dropped} dropped, ${p.failed} failed), ${p.framesPerSecond.toFixed(1)} frames/s, ${where}`;
}

/** Writes a line to stdout, waiting when the pipe is full. */
function writeLine(line: string): Promise<void> | void {
  if (process.stdout.write(`${line}\n`)) return;
  return new Promise((resolve) => process.stdout.once('drain', resolve));
}

export async function videoCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { options, serverArgs, positionals } = splitServerArgs(argv, OPTIONS, true);
  if (positionals.length !== 1) throw new UsageError('give one SOURCE (a video file or a stream URL)');
  const source = positionals[0]!;
  const fps = positiveNumber(options, 'fps', false);
  const policy = choice<FramePolicy>(options, 'policy', ['latest', 'all']) ?? defaultPolicy(source);
  const trackMode = choice(options, 'track', ['auto', 'on', 'off'] as const) ?? 'auto';
  const concurrency = positiveNumber(options, 'concurrency', true) ?? DEFAULT_FRAMES_IN_FLIGHT;
  const maxFrames = positiveNumber(options, 'max-frames', true);
  const output = options.get('output');
  const probeSeconds = positiveNumber(options, 'probe-seconds', false);
  const tools = ffmpegTools(env);
  await checkFfmpeg(tools);

  const controller = new AbortController();
  const onSignal = (): void => {
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const target = await openTarget(options, serverArgs, env, policy);
  try {
    const { frames, info } = await openVideo(tools, source, { fps, policy, probeSeconds });
    const progressLine = createProgress(process.stderr);
    let lastProgress = 0;
    const outFps = fps ?? info.fps ?? 25;
    const summary = await runVideo({
      source: frames,
      infer: target.infer,
      concurrency,
      tracker: trackerFor(trackMode, target.tracking),
      onLine: writeLine,
      openEncoder: output === undefined ? undefined : (size) => spawnEncoder(tools, output, size, outFps),
      maxFrames,
      signal: controller.signal,
      onProgress: (p) => {
        const now = Date.now();
        if (now - lastProgress < (process.stderr.isTTY ? 200 : 2000)) return;
        lastProgress = now;
        progressLine.step(progressText(p, info.duration));
      },
    });
    progressLine.done();
    process.stderr.write(
      `visionserve video: ${summary.interrupted ? 'interrupted' : 'done'}: ${summary.processed} frames in ` +
        `${(summary.wallMs / 1000).toFixed(1)} s (${summary.framesPerSecond.toFixed(1)} frames/s), ` +
        `${summary.dropped} dropped, ${summary.failed} failed${output === undefined ? '' : `; annotated video: ${output}`}\n`,
    );
    if (summary.interrupted) return 130;
    return summary.failed > 0 ? 1 : 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await target.close();
  }
}

export const video: Command = { help: VIDEO_HELP, run: videoCommand };
