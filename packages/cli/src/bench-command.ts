/**
 * `visionserve bench`: runs the benchmark (bench/run-bench.ts) and writes results.json,
 * results.md and chart.svg.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import { formatChart } from './bench/bench-chart.js';
import { CASE_IDS, type CaseId } from './bench/bench-cases.js';
import { formatMarkdown } from './bench/bench-report.js';
import { type BenchTargets, PATHS, type PathId, runBench } from './bench/run-bench.js';
import {
  type Command,
  UsageError,
  choiceOption,
  createProgress,
  flag,
  listOption,
  numberOption,
  parseCommandArgs,
  stringOption,
} from './cli-args.js';

/** ../shared beside the repository (models and photos); dist/src/cli -> repository root is 5 levels up. */
const DEFAULT_SHARED = fileURLToPath(new URL('../../../../../../shared', import.meta.url));

const HELP = `Usage: visionserve bench [options]

Measures every serving path against the raw onnxruntime floor in one run (so the ratios
hold on a noisy machine) and writes results.json, results.md (tables) and chart.svg.

Paths (--paths, default all):
${PATHS.map((p) => `  ${p.id.padEnd(20)} ${p.label}`).join('\n')}
Cases (--cases, default all):
  mobilenet            MobileNetV2 int8, cat_tabby.jpg -> [1,3,224,224] float32 (small request and response)
  raw_detector         generated EfficientDet-D1-sized raw detector: [1,640,640,3] uint8 in,
                       9.0 M floats out (~36 MB tensor_content, ~106 MB JSON)

By default the servers are started here, as child processes on loopback ports (one with typed
gRPC responses, one with --enable_serialization_as_tensor_content), and the in-process path in a
third process; this process only generates load (node:http2 gRPC, node:http keep-alive).

Load:
  --mode closed|open|both    default both
  --concurrency N            closed-loop requests in flight (default 1)
  --rate R                   open-loop arrival rate, req/s (default: --rate-fraction of the
  --rate-fraction F          path's closed-loop throughput, default 0.5)
  --duration-s S             per block (default 3)
  --min-requests N           per block (default 5)
  --max-requests N           per block (default 500)
  --warmup N                 untimed requests per path (default 3)
  --repeat N                 rounds, pooled (default 1)
  --timeout-ms MS            per request (default 120000)
Servers:
  --server-arg FLAG          extra flag for the started servers and the in-process core (repeatable),
                             e.g. --server-arg=--model_instances=1
  --grpc HOST:PORT           measure a running server instead (its models must be named mobilenet and
  --grpc-tensor-content HOST:PORT  raw_detector: serve <--repo>/models.config); a second server with
  --rest URL                 --enable_serialization_as_tensor_content for that row
  --invocations URL
  --server-pid PID           the running server's pid, for server CPU time
Files:
  --shared DIR               models and photos (default ${DEFAULT_SHARED})
  --repo DIR                 where to stage the model repository (default: a temporary directory)
  --out DIR                  output directory (default ./bench-results)
  --json                     print results.json instead of the Markdown tables

Progress goes to stderr when it is a terminal.
`;

export const bench: Command = {
  help: HELP,
  async run(argv) {
    const { values, positionals } = parseCommandArgs(argv, {
      cases: { type: 'string' },
      paths: { type: 'string' },
      mode: { type: 'string' },
      concurrency: { type: 'string' },
      rate: { type: 'string' },
      'rate-fraction': { type: 'string' },
      'duration-s': { type: 'string' },
      'min-requests': { type: 'string' },
      'max-requests': { type: 'string' },
      warmup: { type: 'string' },
      repeat: { type: 'string' },
      'timeout-ms': { type: 'string' },
      'server-arg': { type: 'string', multiple: true },
      grpc: { type: 'string' },
      'grpc-tensor-content': { type: 'string' },
      rest: { type: 'string' },
      invocations: { type: 'string' },
      'server-pid': { type: 'string' },
      shared: { type: 'string' },
      repo: { type: 'string' },
      out: { type: 'string' },
      json: { type: 'boolean' },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]!}"`);
    const cases = (listOption(values, 'cases') ?? [...CASE_IDS]).map((c) => {
      if (!(CASE_IDS as readonly string[]).includes(c))
        throw new UsageError(`unknown case "${c}" (cases: ${CASE_IDS.join(', ')})`);
      return c as CaseId;
    });
    const pathIds = PATHS.map((p) => p.id);
    const paths = (listOption(values, 'paths') ?? pathIds).map((p) => {
      if (!(pathIds as readonly string[]).includes(p))
        throw new UsageError(`unknown path "${p}" (paths: ${pathIds.join(', ')})`);
      return p as PathId;
    });
    const mode = choiceOption(values, 'mode', ['closed', 'open', 'both'] as const) ?? 'both';
    const serverArgs = ((values['server-arg'] as string[] | undefined) ?? []).map(String);
    const targets: BenchTargets = {
      ...(stringOption(values, 'grpc') !== undefined ? { grpc: stringOption(values, 'grpc')! } : {}),
      ...(stringOption(values, 'grpc-tensor-content') !== undefined
        ? { grpcTensorContent: stringOption(values, 'grpc-tensor-content')! }
        : {}),
      ...(stringOption(values, 'rest') !== undefined ? { rest: stringOption(values, 'rest')! } : {}),
      ...(stringOption(values, 'invocations') !== undefined
        ? { invocations: stringOption(values, 'invocations')! }
        : {}),
    };
    const serverPid = numberOption(values, 'server-pid', { min: 1, integer: true });
    const external = Object.keys(targets).length > 0;
    if (serverPid !== undefined && !external)
      throw new UsageError('--server-pid goes with --grpc/--rest/--invocations');
    const outDir = resolve(stringOption(values, 'out') ?? 'bench-results');
    const progress = createProgress();
    const report = await runBench({
      cases,
      paths,
      modes: mode === 'both' ? ['closed', 'open'] : [mode],
      concurrency: numberOption(values, 'concurrency', { min: 1, max: 1024, integer: true }) ?? 1,
      ratePerSecond: numberOption(values, 'rate', { min: 0.001 }),
      rateFraction: numberOption(values, 'rate-fraction', { min: 0.01, max: 10 }) ?? 0.5,
      durationMs: (numberOption(values, 'duration-s', { min: 0 }) ?? 3) * 1000,
      minRequests: numberOption(values, 'min-requests', { min: 1, integer: true }) ?? 5,
      maxRequests: numberOption(values, 'max-requests', { min: 1, integer: true }) ?? 500,
      warmup: numberOption(values, 'warmup', { min: 0, integer: true }) ?? 3,
      repeat: numberOption(values, 'repeat', { min: 1, integer: true }) ?? 1,
      timeoutMs: numberOption(values, 'timeout-ms', { min: 1 }) ?? 120_000,
      sharedDir: resolve(stringOption(values, 'shared') ?? DEFAULT_SHARED),
      repoDir:
        stringOption(values, 'repo') !== undefined ? resolve(stringOption(values, 'repo')!) : undefined,
      targets: external ? { ...targets, ...(serverPid !== undefined ? { serverPid } : {}) } : undefined,
      serverArgs,
      onProgress: (text) => {
        if (text === '') progress.done();
        else progress.update(text);
      },
      log: (line) => {
        if (process.stderr.isTTY) progress.update(line);
      },
    });
    progress.done();
    await mkdir(outDir, { recursive: true });
    const markdown = formatMarkdown(report);
    await writeFile(join(outDir, 'results.json'), JSON.stringify(report, null, 2) + '\n');
    await writeFile(join(outDir, 'results.md'), markdown);
    await writeFile(join(outDir, 'chart.svg'), formatChart(report));
    console.log(flag(values, 'json') ? JSON.stringify(report, null, 2) : markdown);
    console.error(`wrote ${join(outDir, 'results.md')}, results.json and chart.svg`);
    return 0;
  },
};
