import {
  type ExecutionParameters,
  type RunningVisionServer,
  type S3Store,
  createS3Store,
} from '@visionserve/server';
import { httpStatusFor, toServingError } from '@visionserve/protocol';
import { type Command, UsageError, createProgress } from './cli-args.js';
import { splitServerArgs, startInProcessServer } from './server-args.js';
import {
  type InvokeResult,
  type TransformInvoke,
  type TransformSummary,
  runTransformJob,
} from './transform/transform-job.js';
import {
  type InputFile,
  type OutputLocation,
  listInputs,
  openOutput,
} from './transform/transform-location.js';
import { isVideoFile, transformVideos, type VideoTransformSummary } from './transform/transform-videos.js';
import { checkFfmpeg, ffmpegTools } from './video/ffmpeg.js';
import { DEFAULT_FRAMES_IN_FLIGHT } from './video/video-pipeline.js';
import type { AssembleWith, BatchStrategy, SplitType } from './transform/transform-records.js';

export const TRANSFORM_HELP = `Usage: visionserve transform --input <path|s3://...> --output <dir|s3://...> [options] [server flags]

SageMaker Batch Transform semantics, locally or on S3: every input file becomes
<output>/<name>.out. In-process by default (the server's /invocations logic runs in
this process, no HTTP hop; give the model with the serve flags, e.g.
--model_base_path, --sagemaker_model_dir or --model_config_file), or against a
running endpoint with --endpoint.

Options:
  --input PATH|s3://bucket/prefix   a file, a directory (every file below it) or an S3 prefix
  --output DIR|s3://bucket/prefix   where <name>.out files go
  --content-type TYPE               request Content-Type (default: by file extension)
  --accept TYPE                     request Accept (default application/jsonlines with
                                    --assemble-with Line, else application/json)
  --split-type None|Line            None: one request per file; Line: one record per line (default None)
  --batch-strategy SingleRecord|MultiRecord
                                    records per request (default: the server's execution parameters)
  --max-payload-mb N                largest request in MiB (default: execution parameters, 6)
  --max-concurrent-transforms N     requests in flight (default: execution parameters)
  --assemble-with None|Line         Line: each answer on its own line (default None)
  --model-name NAME                 tfs-model-name of every request (default: the default model)
  --custom-attributes TEXT          X-Amzn-SageMaker-Custom-Attributes of every request
  --endpoint URL                    send to a running endpoint (e.g. http://127.0.0.1:8080)
  --state-dir DIR                   checkpoints of unfinished outputs (default <output>/.transform-state,
                                    or a cache directory for s3:// outputs)

Video files (.mp4, .m4v, .mov, .mkv, .webm, .avi, .mpg, .mpeg, .ts, .flv, .ogv, .3gp; needs
ffmpeg) become one JSON line per frame, as \`visionserve video\` prints them, every frame sent
to /invocations as a JPEG.
Finished outputs are skipped, so rerunning an interrupted job resumes it; a line-split
file continues from its last checkpoint. Failed records are listed in
<output>/transform-failures.jsonl (one JSON object per failure) and the job goes on;
with --assemble-with Line their output line is {"error": ...}. A JSON summary is
printed on stdout. Exit codes: 0 all done, 1 some records failed or the job stopped on
an error, 2 usage error, 130 interrupted (rerun to resume).
S3 uses the AWS SDK's standard credential chain; AWS_ENDPOINT_URL_S3 (or S3_ENDPOINT)
points it at an S3-compatible store.
`;

/** Options of this command; everything else is a server flag. */
const OPTIONS = new Set([
  'input',
  'output',
  'content-type',
  'accept',
  'split-type',
  'batch-strategy',
  'max-payload-mb',
  'max-concurrent-transforms',
  'assemble-with',
  'model-name',
  'custom-attributes',
  'endpoint',
  'state-dir',
]);

function choice<T extends string>(
  options: Map<string, string>,
  name: string,
  values: readonly T[],
): T | undefined {
  const v = options.get(name);
  if (v === undefined) return undefined;
  if (!(values as readonly string[]).includes(v)) {
    throw new UsageError(`--${name} expects ${values.join('|')}, got "${v}"`);
  }
  return v as T;
}

function positive(options: Map<string, string>, name: string): number | undefined {
  const v = options.get(name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} expects a positive integer, got "${v}"`);
  return n;
}

const SAGEMAKER_DEFAULTS: ExecutionParameters = {
  MaxConcurrentTransforms: 1,
  BatchStrategy: 'MULTI_RECORD',
  MaxPayloadInMB: 6,
};

/** An endpoint's execution parameters; SageMaker's defaults when it has none. */
async function endpointParameters(endpoint: string): Promise<ExecutionParameters> {
  try {
    const res = await fetch(`${endpoint}/execution-parameters`);
    if (!res.ok) return SAGEMAKER_DEFAULTS;
    return { ...SAGEMAKER_DEFAULTS, ...((await res.json()) as Partial<ExecutionParameters>) };
  } catch (error) {
    throw new Error(
      `cannot reach ${endpoint}: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
    );
  }
}

function endpointInvoke(endpoint: string, customAttributes: string): TransformInvoke {
  return async (body, contentType, accept) => {
    let res: Response;
    try {
      res = await fetch(`${endpoint}/invocations`, {
        method: 'POST',
        body,
        headers: {
          ...(contentType === undefined ? {} : { 'Content-Type': contentType }),
          Accept: accept,
          ...(customAttributes === '' ? {} : { 'X-Amzn-SageMaker-Custom-Attributes': customAttributes }),
        },
      });
    } catch (error) {
      const cause =
        error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
      return { ok: false, status: 0, error: cause };
    }
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (res.ok) return { ok: true, body: bytes };
    let message = Buffer.from(bytes).toString('utf8');
    try {
      const parsed = JSON.parse(message) as { error?: unknown };
      if (typeof parsed.error === 'string') message = parsed.error;
    } catch {
      // not JSON: keep the text
    }
    return { ok: false, status: res.status, error: message };
  };
}

function inProcessInvoke(server: RunningVisionServer, customAttributes: string): TransformInvoke {
  return async (body, contentType, accept): Promise<InvokeResult> => {
    try {
      const answer = await server.invoke(
        { body, contentType, accept, customAttributes },
        { signal: new AbortController().signal },
      );
      return { ok: true, body: answer.body };
    } catch (error) {
      const e = toServingError(error);
      const status = e.reason === 'unsupported-media-type' ? 415 : httpStatusFor(e.code);
      return { ok: false, status, error: e.message };
    }
  };
}

function formatEta(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return '--:--';
  const s = Math.round(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

function bar(fraction: number, width = 20): string {
  const filled = Math.max(0, Math.min(width, Math.round(fraction * width)));
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

/** The video inputs (one `.out` of JSON Lines each, a line per frame); nothing when there are none. */
async function transformVideoInputs(
  videos: readonly InputFile[],
  options: {
    output: OutputLocation;
    invoke: TransformInvoke;
    signal: AbortSignal;
    env: NodeJS.ProcessEnv;
    onVideoDone: (file: InputFile, frames: number) => void;
  },
): Promise<VideoTransformSummary | undefined> {
  if (videos.length === 0) return undefined;
  const tools = ffmpegTools(options.env);
  await checkFfmpeg(tools);
  // Videos one at a time, their frames as `visionserve video` sends them (not
  // --max-concurrent-transforms: frames in flight beyond the default only competed for the cores).
  return transformVideos({ ...options, inputs: videos, tools, concurrency: DEFAULT_FRAMES_IN_FLIGHT });
}

/** One summary for the record inputs and the videos; a video's frames count as records. */
function mergeVideoSummary(
  records: TransformSummary,
  videos: VideoTransformSummary | undefined,
  started: number,
): TransformSummary {
  if (videos === undefined) return records;
  const frames = records.records + videos.frames;
  const wallMs = Date.now() - started;
  return {
    ...records,
    wallMs,
    recordsPerSecond: frames / Math.max(0.001, wallMs / 1000),
    interrupted: records.interrupted || videos.interrupted,
    files: records.files + videos.filesSkipped + videos.filesWritten + videos.filesFailed,
    filesSkipped: records.filesSkipped + videos.filesSkipped,
    filesWritten: records.filesWritten + videos.filesWritten,
    filesFailed: records.filesFailed + videos.filesFailed,
    records: frames,
    recordsFailed: records.recordsFailed + videos.framesFailed,
    failures: [...records.failures, ...videos.failures],
  };
}

export async function transformCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { options, serverArgs } = splitServerArgs(argv, OPTIONS);
  const input = options.get('input');
  const outputUri = options.get('output');
  if (input === undefined || outputUri === undefined)
    throw new UsageError('--input and --output are required');
  const splitType = choice<SplitType>(options, 'split-type', ['None', 'Line']) ?? 'None';
  const assembleWith = choice<AssembleWith>(options, 'assemble-with', ['None', 'Line']) ?? 'None';
  const strategyOption = choice<BatchStrategy>(options, 'batch-strategy', ['SingleRecord', 'MultiRecord']);
  const endpoint = options.get('endpoint')?.replace(/\/+$/, '');
  const modelName = options.get('model-name');
  const customAttributes = [
    ...(options.get('custom-attributes') === undefined ? [] : [options.get('custom-attributes')!]),
    ...(modelName === undefined ? [] : [`tfs-model-name=${modelName}`]),
  ].join(',');
  if (endpoint !== undefined && serverArgs.length > 0) {
    throw new UsageError(`server flags (${serverArgs[0]}) make no sense with --endpoint`);
  }
  let s3: S3Store | undefined;
  const store = (): S3Store => (s3 ??= createS3Store({ env }));

  let server: RunningVisionServer | undefined;
  const controller = new AbortController();
  const onSignal = (): void => {
    if (!controller.signal.aborted) {
      process.stderr.write(
        '\nvisionserve transform: stopping; requests in flight finish, then checkpoints are saved\n',
      );
    }
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    let parameters: ExecutionParameters;
    let invoke: TransformInvoke;
    if (endpoint !== undefined) {
      parameters = await endpointParameters(endpoint);
      invoke = endpointInvoke(endpoint, customAttributes);
    } else {
      server = (await startInProcessServer(serverArgs, env)).server;
      parameters = server.executionParameters;
      invoke = inProcessInvoke(server, customAttributes);
    }
    const batchStrategy: BatchStrategy =
      strategyOption ?? (parameters.BatchStrategy === 'SINGLE_RECORD' ? 'SingleRecord' : 'MultiRecord');
    const maxPayloadMb = positive(options, 'max-payload-mb') ?? parameters.MaxPayloadInMB;
    const concurrency = positive(options, 'max-concurrent-transforms') ?? parameters.MaxConcurrentTransforms;
    const accept =
      options.get('accept') ?? (assembleWith === 'Line' ? 'application/jsonlines' : 'application/json');
    const output = openOutput(outputUri, store, options.get('state-dir'));
    const inputs = await listInputs(input, store, outputUri);
    if (inputs.length === 0) throw new Error(`no input files under ${input}`);
    const videos = inputs.filter((f) => isVideoFile(f.rel));
    const records = inputs.filter((f) => !isVideoFile(f.rel));
    const progressLine = createProgress(process.stderr);
    process.stderr.write(
      `visionserve transform: ${inputs.length} file(s) from ${input} to ${outputUri}; split ${splitType}, ${batchStrategy}, ` +
        `max payload ${maxPayloadMb} MiB, ${concurrency} concurrent, assemble ${assembleWith}, ${endpoint ?? 'in-process'}\n`,
    );
    const started = Date.now();
    const recordSummary = await runTransformJob({
      inputs: records,
      output,
      invoke,
      splitType,
      batchStrategy,
      maxPayloadBytes: maxPayloadMb * 1024 * 1024,
      concurrency,
      assembleWith,
      accept,
      contentType: options.get('content-type'),
      signal: controller.signal,
      progressEveryMs: process.stderr.isTTY ? 200 : 2000,
      onProgress: (p) => {
        const fraction = p.totalBytes === 0 ? 1 : p.bytesDone / p.totalBytes;
        progressLine.step(
          `${bar(fraction)} ${(fraction * 100).toFixed(1)}% files ${p.filesDone}/${p.files}, ${p.records} records, ` +
            `${p.recordsPerSecond.toFixed(1)} records/s, ETA ${formatEta(p.etaSeconds)}`,
        );
      },
    });
    const videoSummary = await transformVideoInputs(videos, {
      output,
      invoke,
      signal: controller.signal,
      env,
      onVideoDone: (file, frames) => {
        progressLine.step(`video ${file.rel}: ${frames} frames`);
      },
    });
    const summary = mergeVideoSummary(recordSummary, videoSummary, started);
    progressLine.done();
    let manifest: string | undefined;
    if (summary.failures.length > 0) {
      manifest = await output.writeExtra(
        'transform-failures.jsonl',
        Buffer.from(summary.failures.map((f) => JSON.stringify(f)).join('\n') + '\n'),
      );
    }
    process.stderr.write(
      `visionserve transform: ${summary.interrupted ? 'interrupted' : 'done'} in ${(summary.wallMs / 1000).toFixed(1)} s: ` +
        `${summary.filesWritten} output(s) written, ${summary.filesSkipped} already there, ${summary.filesFailed} failed; ` +
        `${summary.records} records (${summary.recordsPerSecond.toFixed(1)}/s) in ${summary.requests} requests` +
        `${summary.recordsResumed > 0 ? `, ${summary.recordsResumed} resumed past` : ''}, ${summary.recordsFailed} failed` +
        (manifest === undefined ? '' : `; failures: ${manifest}`) +
        `${summary.interrupted ? '\nrerun the same command to resume' : ''}\n`,
    );
    const { failures, ...counts } = summary;
    console.log(JSON.stringify({ ...counts, failures: failures.length, failuresManifest: manifest }));
    if (summary.interrupted) return 130;
    return summary.recordsFailed > 0 || summary.filesFailed > 0 ? 1 : 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await server?.close();
  }
}

export const transform: Command = { help: TRANSFORM_HELP, run: transformCommand };
