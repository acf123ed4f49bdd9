/**
 * `visionserve bench`: runs the benchmark suites (bench/run-bench.ts) and writes
 * results.json, results.md and chart.svg.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import { formatChart } from './bench/bench-chart.js';
import { CASE_IDS, CASES, type CaseId } from './bench/bench-cases.js';
import { PATHS, PATH_IDS, type PathId } from './bench/bench-paths.js';
import { type BenchPlan, formatDuration } from './bench/bench-plan.js';
import { formatMarkdown } from './bench/bench-report.js';
import { SUITES, SUITE_IDS, type SuiteId, parseSuites } from './bench/bench-suites.js';
import { isCpuList } from './bench/cpu-affinity.js';
import {
  DEFAULT_OVERLOAD,
  OVERLOAD_PROTOCOLS,
  SOAK_OVERLOAD,
  type OverloadOptions,
} from './bench/overload-suite.js';
import { DEFAULT_STREAM_SECONDS } from './bench/stream-suite.js';
import {
  type BenchOptions,
  type BenchTargets,
  overloadOptions,
  runBench,
  planFor,
  suiteCases,
} from './bench/run-bench.js';
import { DEFAULT_SWEEP_CONCURRENCY, DEFAULT_SWEEP_CONFIGS, parseSweepConfig } from './bench/sweep-configs.js';
import {
  type Command,
  type ParsedValues,
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
export const DEFAULT_SHARED = fileURLToPath(new URL('../../../../../shared', import.meta.url));

const HELP = `Usage: visionserve bench [options]

Measures visionserve against raw onnxruntime floors measured in the same run (so the ratios
hold on a noisy machine) and writes results.json, results.md (tables) and chart.svg. Before
it starts it states how many steps it has and about how long it will take; progress goes to
stderr (a redrawn line on a terminal, one line per step otherwise).

Suites (--suite, comma-separated or all; default latency):
${SUITE_IDS.map((s) => `  ${s.padEnd(20)} ${SUITES[s].description}\n${' '.repeat(23)}(default cases: ${SUITES[s].defaultCases.join(', ')})`).join('\n')}
Cases (--cases, for every suite):
${CASE_IDS.map((c) => `  ${c.padEnd(20)} ${CASES[c].title}`).join('\n')}
Paths of the latency suite (--paths, default all):
${PATHS.map((p) => `  ${p.id.padEnd(20)} ${p.label}`).join('\n')}

By default the servers are started here, as child processes on loopback ports (latency: one
with typed gRPC responses, one with --enable_serialization_as_tensor_content, and the
in-process path in a third process; sweep: one per layout; cold-start: two); this process only
generates load (node:http2 gRPC, node:http keep-alive). The staged model repository lives in a
temporary folder that is removed at exit, also on errors and Ctrl-C.

Load:
  --mode closed|open|both    latency suite (default both)
  --concurrency N            latency suite: closed-loop requests in flight (default 1)
  --rate R                   open-loop arrival rate, req/s (default: --rate-fraction of the
  --rate-fraction F          path's closed-loop throughput, default 0.5)
  --duration-s S             per block and per sweep point (default 3)
  --min-requests N           per block (default 5)
  --max-requests N           per latency block and floor block (default 500; sweep points are timed)
  --warmup N                 untimed requests per path (default 3)
  --warmup-s S               latency suite: served paths keep warming up for at least S seconds
                             (default 1: fresh server processes reach JIT and GC steady state)
  --repeat N                 latency suite: rounds, pooled (default 1)
  --timeout-ms MS            per request (default 120000)
Sweep:
  --configs LIST             server layouts <instances>x<intra-op threads>[+b<timeout>[us|ms]][+spin]
                             (batching: max batch 8; spin: onnxruntime threads spin), default ${DEFAULT_SWEEP_CONFIGS.join(',')}
  --sweep-concurrency LIST   default ${DEFAULT_SWEEP_CONCURRENCY.join(',')}
  --sweep-encoding E         tensor_content (default; servers get --enable_serialization_as_tensor_content)
                             or typed; also used by cold-start
Cold start:
  --cold-requests N          Predict calls per case after the first (default 30)
Stream:
  --stream-seconds S         the long stream whose server RSS is followed (default ${DEFAULT_STREAM_SECONDS};
                             600 for a 10-minute figure)
Overload (issue 9's load test; admission flags go to the server with --server-arg):
  --overload-protocols LIST  grpc,rest (default both; a fresh server each)
  --overload-factor F        offered rate = F × measured capacity (default ${DEFAULT_OVERLOAD.factor})
  --overload-duration-s S    open loop length (default ${DEFAULT_OVERLOAD.durationMs / 1000})
  --overload-after-s S       RSS followed this long after the last answer (default ${DEFAULT_OVERLOAD.afterMs / 1000})
  --capacity-duration-s S    per closed-loop capacity point (default ${DEFAULT_OVERLOAD.capacityDurationMs / 1000})
  --capacity-concurrency L   closed-loop concurrencies tried until two bring no gain
                             (default ${DEFAULT_OVERLOAD.capacityConcurrencies.join(',')})
  --arrivals poisson|fixed   open-loop arrivals (default ${DEFAULT_OVERLOAD.arrivals})
  --overload-timeout-ms MS   per request, also sent as grpc-timeout (default ${DEFAULT_OVERLOAD.timeoutMs})
  --overload-grpc-connections N  HTTP/2 connections for the gRPC load (default ${DEFAULT_OVERLOAD.grpcConnections}, one channel)
  --overload-rest-expect-continue  REST requests send Expect: 100-continue and their body only
                             when asked (as curl does for bodies over 1 MB)
  --overload-short           smoke test: 3 s open loop, 3 s after, 1 s capacity points at 1,4,16,
                             1 s settle before the open loop (default 3 s)
                             (the flags above still override it)
  --overload-soak            the soak: an open loop at 0.7× capacity for 30 min, judged by its last
                             5-minute window against its first (RSS growth < 5 %, p99 drift < 20 %,
                             every request OK); the flags above still override it
  --server-cpus LIST         start the overload servers under taskset --cpu-list LIST
  --client-cpus LIST         move this process (the load generator) to LIST for the overload suite
Servers:
  --server-arg FLAG          extra flag for every started server and the in-process core (repeatable),
                             e.g. --server-arg=--model_instances=1
  --grpc HOST:PORT           latency suite only: measure a running server instead (its models must
  --grpc-tensor-content HOST:PORT  be named like the cases: serve <--repo>/models.config); a second
  --rest URL                 server with --enable_serialization_as_tensor_content for that row
  --invocations URL
  --server-pid PID           the running server's pid, for server CPU time
Files:
  --shared DIR               models and photos (default ${DEFAULT_SHARED})
  --repo DIR                 stage the model repository here and keep it (default: temporary)
  --out DIR                  output directory (default ./bench-results)
  --json                     print results.json instead of the Markdown tables
  --plan                     print the steps and the estimated duration, run nothing
`;

function describePlan(plan: BenchPlan, options: BenchOptions): string {
  const parts: string[] = [];
  const suites = options.suites ?? ['latency'];
  const add = (s: SuiteId, p: { steps: number; estimateS: number } | undefined, what: string): void => {
    if (p && suites.includes(s))
      parts.push(
        `${s} (${suiteCases(options, s).join(', ')}; ${what}): ${p.steps} steps, ~${formatDuration(p.estimateS)}`,
      );
  };
  add('latency', plan.latency, `${options.paths.length} paths, ${options.repeat} round(s)`);
  add('sweep', plan.sweep, `${options.sweep?.configs?.length ?? DEFAULT_SWEEP_CONFIGS.length} layouts`);
  add('cold-start', plan.coldStart, `${options.coldStartRequests ?? 30} requests`);
  add(
    'stream',
    plan.stream,
    `1 and 4 streams, latest at 2×, ${formatDuration(options.durationMs / 1000)} each; RSS over a ${formatDuration(options.streamSeconds ?? DEFAULT_STREAM_SECONDS)} stream`,
  );
  const o = overloadOptions(options);
  add(
    'overload',
    plan.overload,
    `${o.protocols.join(' and ')}, ${o.factor}× capacity for ${formatDuration(o.durationMs / 1000)}, RSS ${formatDuration(o.afterMs / 1000)} after`,
  );
  return `visionserve bench: ${parts.join('; ')}. Estimated ${formatDuration(plan.estimateS)} in all.`;
}

/** Parses the command line into runBench options (throws UsageError). */
export function parseBenchArgs(argv: readonly string[]): {
  options: BenchOptions;
  outDir: string;
  json: boolean;
  planOnly: boolean;
} {
  const { values, positionals } = parseCommandArgs(argv, {
    suite: { type: 'string' },
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
    'warmup-s': { type: 'string' },
    repeat: { type: 'string' },
    'timeout-ms': { type: 'string' },
    configs: { type: 'string' },
    'sweep-concurrency': { type: 'string' },
    'sweep-encoding': { type: 'string' },
    'cold-requests': { type: 'string' },
    'stream-seconds': { type: 'string' },
    'overload-protocols': { type: 'string' },
    'overload-factor': { type: 'string' },
    'overload-duration-s': { type: 'string' },
    'overload-after-s': { type: 'string' },
    'capacity-duration-s': { type: 'string' },
    'capacity-concurrency': { type: 'string' },
    arrivals: { type: 'string' },
    'overload-timeout-ms': { type: 'string' },
    'overload-grpc-connections': { type: 'string' },
    'overload-rest-expect-continue': { type: 'boolean' },
    'overload-short': { type: 'boolean' },
    'overload-soak': { type: 'boolean' },
    'server-cpus': { type: 'string' },
    'client-cpus': { type: 'string' },
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
    plan: { type: 'boolean' },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]!}"`);
  const suiteText = stringOption(values, 'suite');
  const suites = suiteText === undefined ? (['latency'] as SuiteId[]) : parseSuites(suiteText);
  if (suites === undefined)
    throw new UsageError(
      `--suite expects ${SUITE_IDS.join(', ')} or all (comma-separated), got "${suiteText!}"`,
    );
  const casesList = listOption(values, 'cases')?.map((c) => {
    if (!(CASE_IDS as readonly string[]).includes(c))
      throw new UsageError(`unknown case "${c}" (cases: ${CASE_IDS.join(', ')})`);
    return c as CaseId;
  });
  const paths = (listOption(values, 'paths') ?? [...PATH_IDS]).map((p) => {
    if (!(PATH_IDS as readonly string[]).includes(p))
      throw new UsageError(`unknown path "${p}" (paths: ${PATH_IDS.join(', ')})`);
    return p as PathId;
  });
  const configs = listOption(values, 'configs')?.map((c) => {
    try {
      return parseSweepConfig(c);
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message : String(error));
    }
  });
  const sweepConcurrency = listOption(values, 'sweep-concurrency')?.map((c) => {
    const n = Number(c);
    if (!Number.isInteger(n) || n < 1 || n > 1024)
      throw new UsageError(`--sweep-concurrency expects integers in [1, 1024], got "${c}"`);
    return n;
  });
  const encoding = choiceOption(values, 'sweep-encoding', ['tensor_content', 'typed'] as const);
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
  if (external && suites.some((s) => s !== 'latency'))
    throw new UsageError('--grpc/--rest/--invocations measure a running server: only with --suite latency');
  const coldRequests = numberOption(values, 'cold-requests', { min: 2, max: 100_000, integer: true });
  const streamSeconds = numberOption(values, 'stream-seconds', { min: 1, max: 86_400 });
  const overload = parseOverloadArgs(values);
  const options: BenchOptions = {
    suites,
    ...(casesList ? { cases: casesList } : {}),
    paths,
    modes: mode === 'both' ? ['closed', 'open'] : [mode],
    concurrency: numberOption(values, 'concurrency', { min: 1, max: 1024, integer: true }) ?? 1,
    ratePerSecond: numberOption(values, 'rate', { min: 0.001 }),
    rateFraction: numberOption(values, 'rate-fraction', { min: 0.01, max: 10 }) ?? 0.5,
    durationMs: (numberOption(values, 'duration-s', { min: 0 }) ?? 3) * 1000,
    minRequests: numberOption(values, 'min-requests', { min: 1, integer: true }) ?? 5,
    maxRequests: numberOption(values, 'max-requests', { min: 1, integer: true }) ?? 500,
    warmup: numberOption(values, 'warmup', { min: 0, integer: true }) ?? 3,
    warmupMs: (numberOption(values, 'warmup-s', { min: 0 }) ?? 1) * 1000,
    repeat: numberOption(values, 'repeat', { min: 1, integer: true }) ?? 1,
    timeoutMs: numberOption(values, 'timeout-ms', { min: 1 }) ?? 120_000,
    sharedDir: resolve(stringOption(values, 'shared') ?? DEFAULT_SHARED),
    repoDir: stringOption(values, 'repo') !== undefined ? resolve(stringOption(values, 'repo')!) : undefined,
    targets: external ? { ...targets, ...(serverPid !== undefined ? { serverPid } : {}) } : undefined,
    serverArgs,
    sweep: {
      ...(configs ? { configs } : {}),
      ...(sweepConcurrency ? { concurrencies: sweepConcurrency } : {}),
      ...(encoding ? { encoding } : {}),
    },
    ...(coldRequests !== undefined ? { coldStartRequests: coldRequests } : {}),
    ...(streamSeconds !== undefined ? { streamSeconds } : {}),
    ...(Object.keys(overload).length > 0 ? { overload } : {}),
  };
  return {
    options,
    outDir: resolve(stringOption(values, 'out') ?? 'bench-results'),
    json: flag(values, 'json'),
    planOnly: flag(values, 'plan'),
  };
}

/** The overload suite's settings given on the command line (`--overload-short` first, then the explicit ones). */
function parseOverloadArgs(values: ParsedValues): Partial<OverloadOptions> {
  const protocols = listOption(values, 'overload-protocols')?.map((p) => {
    if (!(OVERLOAD_PROTOCOLS as readonly string[]).includes(p))
      throw new UsageError(
        `unknown protocol "${p}" (--overload-protocols: ${OVERLOAD_PROTOCOLS.join(', ')})`,
      );
    return p as OverloadOptions['protocols'][number];
  });
  const concurrencies = listOption(values, 'capacity-concurrency')?.map((c) => {
    const n = Number(c);
    if (!Number.isInteger(n) || n < 1 || n > 1024)
      throw new UsageError(`--capacity-concurrency expects integers in [1, 1024], got "${c}"`);
    return n;
  });
  const seconds = (name: string, min: number): number | undefined => {
    const s = numberOption(values, name, { min });
    return s === undefined ? undefined : s * 1000;
  };
  const cpus = (name: string): string | undefined => {
    const text = stringOption(values, name);
    if (text !== undefined && !isCpuList(text))
      throw new UsageError(`--${name} expects a CPU list such as 0 or 0,1 or 0-3, got "${text}"`);
    return text;
  };
  const given: Partial<Record<keyof OverloadOptions, unknown>> = {
    protocols,
    factor: numberOption(values, 'overload-factor', { min: 0.01, max: 100 }),
    durationMs: seconds('overload-duration-s', 0.1),
    afterMs: seconds('overload-after-s', 0),
    capacityDurationMs: seconds('capacity-duration-s', 0.1),
    capacityConcurrencies: concurrencies ? [...new Set(concurrencies)].sort((a, b) => a - b) : undefined,
    arrivals: choiceOption(values, 'arrivals', ['poisson', 'fixed'] as const),
    timeoutMs: numberOption(values, 'overload-timeout-ms', { min: 1 }),
    grpcConnections: numberOption(values, 'overload-grpc-connections', { min: 1, max: 256, integer: true }),
    restExpectContinue: flag(values, 'overload-rest-expect-continue') ? true : undefined,
    serverCpus: cpus('server-cpus'),
    clientCpus: cpus('client-cpus'),
  };
  const short: Partial<OverloadOptions> = flag(values, 'overload-short')
    ? {
        durationMs: 3000,
        afterMs: 3000,
        capacityDurationMs: 1000,
        capacityConcurrencies: [1, 4, 16],
        settleMs: 1000,
      }
    : {};
  const soak: Partial<OverloadOptions> = flag(values, 'overload-soak') ? SOAK_OVERLOAD : {};
  return {
    ...short,
    ...soak,
    ...(Object.fromEntries(
      Object.entries(given).filter(([, v]) => v !== undefined),
    ) as Partial<OverloadOptions>),
  };
}

export const bench: Command = {
  help: HELP,
  async run(argv) {
    const { options, outDir, json, planOnly } = parseBenchArgs(argv);
    if (planOnly) {
      console.log(describePlan(planFor(options), options));
      return 0;
    }
    const progress = createProgress();
    const report = await runBench({
      ...options,
      onPlan: (plan) => {
        console.error(describePlan(plan, options));
      },
      onStep: (text) => {
        progress.step(text);
      },
      onProgress: (text) => {
        if (text === '') progress.done();
        else progress.update(text);
      },
      log: (line) => {
        progress.step(line);
      },
    });
    progress.done();
    await mkdir(outDir, { recursive: true });
    const markdown = formatMarkdown(report);
    await writeFile(join(outDir, 'results.json'), JSON.stringify(report, null, 2) + '\n');
    await writeFile(join(outDir, 'results.md'), markdown);
    const files = ['results.md', 'results.json'];
    if (report.cases.length > 0) {
      await writeFile(join(outDir, 'chart.svg'), formatChart(report));
      files.push('chart.svg');
    }
    console.log(json ? JSON.stringify(report, null, 2) : markdown);
    console.error(`wrote ${files.map((f) => join(outDir, f)).join(', ')}`);
    return 0;
  },
};
