/**
 * The benchmark orchestrator: every path of every case in one run, interleaved with the
 * raw onnxruntime floor (before and after each case's paths), so ratios to the floor hold
 * on a noisy machine. This process is the load generator (the node:http2 gRPC channel and
 * node:http keep-alive of @visionserve/client); servers run in child processes.
 */
import { mkdtemp } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Tensor,
  createInvocationsClient,
  createTfsGrpcClient,
  createTfsRestClient,
  type InvocationsClient,
  type TfsGrpcClient,
  type TfsRestClient,
  type WireBytes,
} from '@visionserve/client';
import { byteSize } from '@visionserve/protocol';
import { parseFlags, resolveServerConfig } from '@visionserve/server';
import { type OrtFloor, createOrtFloor } from './ort-floor.js';
import {
  type BenchCase,
  type CaseId,
  type StagedRepository,
  loadCase,
  stageRepository,
} from './bench-cases.js';
import { type InProcessProbe, startInProcessProbe } from './in-process-probe.js';
import { type LoopResult, type Send, closedLoop, openLoop, warmUp } from './load-loop.js';
import { ownCpuMs, processCpuMs } from './proc-cpu.js';
import { type ServerProcess, startServerProcess } from './server-process.js';
import { type LatencySummary, median, summarize } from './stats.js';

export type PathId =
  'floor' | 'in-process' | 'grpc-tensor-content' | 'grpc-typed' | 'rest-json' | 'invocations';

/** The paths, in table order, with what each one measures. */
export const PATHS: readonly { readonly id: PathId; readonly label: string; readonly description: string }[] =
  [
    {
      id: 'floor',
      label: 'raw onnxruntime (floor)',
      description: 'session.run on a preloaded tensor in a worker thread, same SessionOptions as the server',
    },
    {
      id: 'in-process',
      label: 'in-process (core)',
      description:
        'InferenceService.predict called in the server process: queue, worker transfer, no transport',
    },
    {
      id: 'grpc-tensor-content',
      label: 'gRPC tensor_content',
      description:
        'Predict with tensor_content both ways (server started with --enable_serialization_as_tensor_content)',
    },
    {
      id: 'grpc-typed',
      label: 'gRPC typed (float_val)',
      description:
        'Predict with typed values both ways (int_val/float_val requests, float_val responses: TF Serving defaults)',
    },
    {
      id: 'rest-json',
      label: 'REST JSON',
      description: 'POST :predict with {"instances": ...}, answer {"predictions": ...}, decoded into tensors',
    },
    {
      id: 'invocations',
      label: '/invocations (image; ≙ REST b64)',
      description:
        'POST /invocations with the JPEG (application/x-image), top-k JSON out. Stands for TF Serving\'s REST {"b64": ...} idiom (encoded image in, server decodes), which needs a string-input model that ONNX cannot express',
    },
  ];

export interface BenchTargets {
  /** gRPC address of a running server (typed responses). */
  readonly grpc?: string;
  /** gRPC address of a running server started with --enable_serialization_as_tensor_content. */
  readonly grpcTensorContent?: string;
  /** REST base URL of a running server. */
  readonly rest?: string;
  /** /invocations base URL of a running server. */
  readonly invocations?: string;
  /** PID of the running server, for server CPU time (same machine only). */
  readonly serverPid?: number;
}

export interface BenchOptions {
  readonly cases: readonly CaseId[];
  readonly paths: readonly PathId[];
  readonly modes: readonly ('closed' | 'open')[];
  /** Requests in flight in the closed loop. */
  readonly concurrency: number;
  /** Open-loop arrival rate (req/s); when undefined, rateFraction × the path's closed-loop throughput. */
  readonly ratePerSecond: number | undefined;
  readonly rateFraction: number;
  /** Per block: run for durationMs, at least minRequests, at most maxRequests. */
  readonly durationMs: number;
  readonly minRequests: number;
  readonly maxRequests: number;
  /** Untimed requests before each path's first block. */
  readonly warmup: number;
  /** Rounds over all paths; samples of all rounds are pooled. */
  readonly repeat: number;
  /** ../shared (models and photos). */
  readonly sharedDir: string;
  /** Where the staged model repository goes (a temporary directory when undefined). */
  readonly repoDir: string | undefined;
  /** Running servers to measure instead of starting our own (embedded mode when undefined). */
  readonly targets: BenchTargets | undefined;
  /** Extra `visionserve serve` flags for the embedded servers and the in-process probe. */
  readonly serverArgs: readonly string[];
  /** Per-request deadline, ms. */
  readonly timeoutMs: number;
  readonly onProgress?: (text: string) => void;
  readonly log?: (line: string) => void;
}

export interface BenchRow {
  readonly case: CaseId;
  readonly path: PathId;
  readonly mode: 'closed' | 'open';
  readonly concurrency: number | undefined;
  readonly ratePerSecond: number | undefined;
  /** Set when the row was not measured, with the reason. */
  readonly skipped?: string;
  readonly latency?: LatencySummary;
  /** p50 of each round (a range when repeat > 1). */
  readonly roundP50s?: readonly number[];
  readonly throughput?: number;
  readonly errors?: number;
  readonly firstError?: string;
  readonly requestBytes?: number;
  readonly responseBytes?: number;
  readonly clientCpuMsPerRequest?: number;
  readonly serverCpuMsPerRequest?: number;
  readonly ratioP50?: number;
  readonly ratioP99?: number;
}

export interface BenchReport {
  readonly meta: {
    readonly date: string;
    readonly node: string;
    readonly cpu: string;
    readonly cores: number;
    readonly mode: 'embedded' | 'external';
    readonly serverArgs: readonly string[];
    readonly options: Omit<BenchOptions, 'onProgress' | 'log' | 'targets'> & { targets?: BenchTargets };
    readonly durationS: number;
  };
  readonly cases: readonly {
    readonly id: CaseId;
    readonly title: string;
    readonly request: string;
    readonly floorP50s: readonly number[];
    readonly floorP50: number;
    readonly floorP99: number;
  }[];
  readonly paths: typeof PATHS;
  readonly rows: readonly BenchRow[];
}

interface Sample extends LoopResult {
  readonly clientCpuMs: number | undefined;
  readonly serverCpuMs: number | undefined;
  readonly wire: WireBytes | undefined;
  readonly ratePerSecond: number | undefined;
}

interface PathRunner {
  /** Why the path cannot run, if it cannot. */
  readonly unavailable?: string;
  /** One request (the benchmark's unit of work). */
  readonly send?: Send;
  /** Process whose CPU counts as server CPU. */
  readonly serverPid?: number;
  /** Wire bytes of the last answer. */
  readonly wire?: () => WireBytes | undefined;
  /** Runs a whole block elsewhere (in-process probe). */
  readonly runBlock?: (mode: 'closed' | 'open', rate: number, warmup: number) => Promise<Sample>;
}

const NO_INVOCATIONS =
  'server has no /invocations listener (started with --sagemaker_port=-1, or an external server without --invocations)';

export async function runBench(options: BenchOptions): Promise<BenchReport> {
  const started = performance.now();
  const log = options.log ?? (() => undefined);
  const progress = options.onProgress ?? (() => undefined);
  const config = resolveServerConfig(parseFlags(options.serverArgs));
  const settings = {
    intraOpThreads: config.intraOpThreads,
    interOpThreads: config.interOpThreads,
    allowSpinning: config.allowSpinning,
  };

  const repo: StagedRepository = await stageRepository(
    options.repoDir ?? (await mkdtemp(join(tmpdir(), 'visionserve-bench-'))),
    options.sharedDir,
    options.cases,
  );
  log(`model repository: ${repo.configFile}`);
  const cases: BenchCase[] = [];
  for (const id of options.cases) cases.push(await loadCase(id, options.sharedDir));

  const wants = (p: PathId): boolean => options.paths.includes(p);
  const closers: (() => Promise<void> | void)[] = [];
  const rows: BenchRow[] = [];
  const caseReports: BenchReport['cases'][number][] = [];
  try {
    // Servers (children) and clients (this process).
    let main: ServerProcess | undefined;
    let tc: ServerProcess | undefined;
    const serverFlags = [`--model_config_file=${repo.configFile}`, ...options.serverArgs];
    const external = options.targets;
    if (external === undefined) {
      if (wants('grpc-typed') || wants('rest-json') || wants('invocations')) {
        log('starting server (typed gRPC responses)...');
        main = await startServerProcess(serverFlags);
        closers.push(() => main!.stop());
      }
      if (wants('grpc-tensor-content')) {
        log('starting server (--enable_serialization_as_tensor_content)...');
        tc = await startServerProcess([...serverFlags, '--enable_serialization_as_tensor_content']);
        closers.push(() => tc!.stop());
      }
    }
    const grpcAddress = external ? external.grpc : main && `127.0.0.1:${main.grpcPort}`;
    const grpcTcAddress = external ? external.grpcTensorContent : tc && `127.0.0.1:${tc.grpcPort}`;
    const restUrl = external ? external.rest : main && `http://127.0.0.1:${main.restPort}`;
    const invocationsUrl = external
      ? external.invocations
      : main?.sagemakerPort !== undefined
        ? `http://127.0.0.1:${main.sagemakerPort}`
        : undefined;
    const mainPid = external ? external.serverPid : main?.pid;
    const tcPid = external ? external.serverPid : tc?.pid;
    const clientOptions = { defaultTimeoutMs: options.timeoutMs };
    const grpcTyped: TfsGrpcClient | undefined = grpcAddress
      ? createTfsGrpcClient({ address: grpcAddress, encoding: 'typed', ...clientOptions })
      : undefined;
    const grpcTc: TfsGrpcClient | undefined = grpcTcAddress
      ? createTfsGrpcClient({ address: grpcTcAddress, encoding: 'tensor_content', ...clientOptions })
      : undefined;
    const rest: TfsRestClient | undefined = restUrl
      ? createTfsRestClient({ baseUrl: restUrl, maxSockets: options.concurrency, ...clientOptions })
      : undefined;
    const invocations: InvocationsClient | undefined = invocationsUrl
      ? createInvocationsClient({
          baseUrl: invocationsUrl,
          maxSockets: options.concurrency,
          ...clientOptions,
        })
      : undefined;
    for (const c of [grpcTyped, grpcTc, rest, invocations])
      if (c)
        closers.push(() => {
          c.close();
        });

    let probe: InProcessProbe | undefined;
    if (wants('in-process')) {
      log('starting in-process probe...');
      probe = await startInProcessProbe(serverFlags);
      closers.push(() => probe!.close());
    }

    const totalBlocks =
      options.repeat *
      cases.length *
      options.paths.reduce((n, p) => n + (p === 'floor' ? 2 : options.modes.length), 0);
    let block = 0;
    const samples = new Map<string, Sample[]>();
    const skipped = new Map<string, string>();
    const key = (c: CaseId, p: PathId, m: string): string => `${c}|${p}|${m}`;

    for (const c of cases) {
      const floor: OrtFloor | undefined = wants('floor')
        ? await createOrtFloor(repo.modelPath(c), c.inputs, settings)
        : undefined;
      if (floor) closers.push(() => floor.close());
      const floorP50s: number[] = [];
      const floorP99s: number[] = [];
      const floorLatencies: number[] = [];
      const runFloor = async (round: number, which: string): Promise<void> => {
        if (!floor) return;
        block++;
        progress(`[${block}/${totalBlocks}] ${c.id} · floor (${which}) · round ${round + 1}`);
        const lat = await floor.measure({
          warmup: options.warmup,
          durationMs: options.durationMs,
          minRuns: options.minRequests,
          maxRuns: options.maxRequests,
        });
        const s = summarize(lat);
        floorP50s.push(s.p50);
        floorP99s.push(s.p99);
        floorLatencies.push(...lat);
      };
      const runners = new Map<PathId, PathRunner>();
      for (const p of options.paths) if (p !== 'floor') runners.set(p, makeRunner(p, c));
      const warmed = new Set<PathId>();

      for (let round = 0; round < options.repeat; round++) {
        await runFloor(round, 'before');
        for (const p of options.paths) {
          if (p === 'floor') continue;
          const runner = runners.get(p)!;
          for (const mode of options.modes) {
            block++;
            const k = key(c.id, p, mode);
            if (skipped.has(k)) continue;
            if (runner.unavailable !== undefined) {
              skipped.set(k, runner.unavailable);
              continue;
            }
            const closedSamples = samples.get(key(c.id, p, 'closed'));
            const closedThroughput = closedSamples?.at(-1)
              ? (closedSamples.at(-1)!.latenciesMs.length * 1000) / closedSamples.at(-1)!.wallMs
              : undefined;
            const rate =
              options.ratePerSecond ??
              (closedThroughput !== undefined ? closedThroughput * options.rateFraction : undefined);
            if (mode === 'open' && rate === undefined) {
              skipped.set(
                k,
                'open loop needs --rate or a closed-loop block of the same path to derive it from',
              );
              continue;
            }
            const label = `[${block}/${totalBlocks}] ${c.id} · ${p} · ${mode === 'closed' ? `closed c=${options.concurrency}` : `open ${rate!.toFixed(1)}/s`} · round ${round + 1}`;
            progress(label);
            try {
              const warmup = warmed.has(p) ? 0 : options.warmup;
              warmed.add(p);
              const sample = await runBlock(runner, mode, rate ?? 0, warmup, (n) => {
                progress(`${label} · ${n} req`);
              });
              samples.set(k, [...(samples.get(k) ?? []), sample]);
              if (sample.latenciesMs.length === 0)
                skipped.set(k, `every request failed: ${sample.firstError ?? 'unknown error'}`);
            } catch (error) {
              skipped.set(k, `failed: ${error instanceof Error ? error.message : String(error)}`);
            }
          }
        }
        await runFloor(round, 'after');
      }

      const floorP50 = median(floorP50s);
      const floorP99 = median(floorP99s);
      caseReports.push({ id: c.id, title: c.title, request: c.requestNote, floorP50s, floorP50, floorP99 });
      if (floor) {
        const s = summarize(floorLatencies);
        const bytes = tensorsBytes(c.inputs);
        rows.push({
          case: c.id,
          path: 'floor',
          mode: 'closed',
          concurrency: 1,
          ratePerSecond: undefined,
          latency: { ...s, p50: floorP50, p99: floorP99 },
          roundP50s: floorP50s,
          throughput: 1000 / s.mean,
          requestBytes: bytes,
          ratioP50: 1,
          ratioP99: 1,
        });
      }
      for (const p of options.paths) {
        if (p === 'floor') continue;
        for (const mode of options.modes) {
          const k = key(c.id, p, mode);
          const list = samples.get(k) ?? [];
          const reason = skipped.get(k);
          const base = {
            case: c.id,
            path: p,
            mode,
            concurrency: mode === 'closed' ? options.concurrency : undefined,
            ratePerSecond: list[0]?.ratePerSecond,
          };
          if (list.length === 0 || (reason !== undefined && list.every((s) => s.latenciesMs.length === 0))) {
            rows.push({ ...base, skipped: reason ?? 'not measured' });
            continue;
          }
          rows.push(aggregate(base, list, floor ? { p50: floorP50, p99: floorP99 } : undefined));
        }
      }
    }

    function makeRunner(p: PathId, c: BenchCase): PathRunner {
      let wire: WireBytes | undefined;
      const track = (w: WireBytes): void => {
        wire = w;
      };
      switch (p) {
        case 'in-process':
          if (!probe) return { unavailable: 'in-process probe not started' };
          return {
            runBlock: async (mode, rate, warmup) => {
              const r = await probe.run({
                model: c.model,
                inputs: c.inputs,
                mode,
                concurrency: options.concurrency,
                ratePerSecond: rate,
                warmup,
                durationMs: options.durationMs,
                minRequests: options.minRequests,
                maxRequests: options.maxRequests,
              });
              const bytes = tensorsBytes(c.inputs);
              return {
                ...r,
                clientCpuMs: undefined,
                serverCpuMs: r.cpuMs,
                wire: { requestBytes: bytes, responseBytes: r.outputBytes },
                ratePerSecond: mode === 'open' ? rate : undefined,
              };
            },
          };
        case 'grpc-tensor-content':
          if (!grpcTc)
            return {
              unavailable:
                'no gRPC server with --enable_serialization_as_tensor_content (pass --grpc-tensor-content)',
            };
          return {
            send: async () => {
              track((await grpcTc.predict(c.model, c.inputs, { encoding: 'tensor_content' })).wire);
            },
            ...(tcPid !== undefined ? { serverPid: tcPid } : {}),
            wire: () => wire,
          };
        case 'grpc-typed':
          if (!grpcTyped) return { unavailable: 'no gRPC server (pass --grpc)' };
          return {
            send: async () => {
              track((await grpcTyped.predict(c.model, c.inputs, { encoding: 'typed' })).wire);
            },
            ...(mainPid !== undefined ? { serverPid: mainPid } : {}),
            wire: () => wire,
          };
        case 'rest-json':
          if (!rest) return { unavailable: 'no REST server (pass --rest)' };
          return {
            send: async () => {
              track((await rest.predict(c.model, c.inputs, { format: 'row', outputs: c.outputs })).wire);
            },
            ...(mainPid !== undefined ? { serverPid: mainPid } : {}),
            wire: () => wire,
          };
        case 'invocations': {
          if (c.image === undefined) return { unavailable: c.noInvocationsReason ?? 'no image input' };
          if (!invocations) return { unavailable: NO_INVOCATIONS };
          const image = c.image.bytes;
          return {
            send: async () => {
              const r = await invocations.invoke(image, {
                model: c.model,
                contentType: 'application/x-image',
              });
              r.json();
              track(r.wire);
            },
            ...(mainPid !== undefined ? { serverPid: mainPid } : {}),
            wire: () => wire,
          };
        }
        case 'floor':
          return { unavailable: 'floor is measured separately' };
      }
    }

    async function runBlock(
      runner: PathRunner,
      mode: 'closed' | 'open',
      rate: number,
      warmup: number,
      onProgress: (n: number) => void,
    ): Promise<Sample> {
      if (runner.runBlock) return runner.runBlock(mode, rate, warmup);
      const send = runner.send!;
      await warmUp(send, warmup);
      const limits = {
        durationMs: options.durationMs,
        minRequests: options.minRequests,
        maxRequests: options.maxRequests,
        onProgress,
      };
      const server0 = runner.serverPid !== undefined ? await processCpuMs(runner.serverPid) : undefined;
      const client0 = ownCpuMs();
      const r =
        mode === 'closed'
          ? await closedLoop(send, options.concurrency, limits)
          : await openLoop(send, rate, limits);
      const client1 = ownCpuMs();
      const server1 = runner.serverPid !== undefined ? await processCpuMs(runner.serverPid) : undefined;
      return {
        ...r,
        clientCpuMs: client1 - client0,
        serverCpuMs: server0 !== undefined && server1 !== undefined ? server1 - server0 : undefined,
        wire: runner.wire?.(),
        ratePerSecond: mode === 'open' ? rate : undefined,
      };
    }
  } finally {
    progress('');
    for (const close of closers.reverse()) {
      try {
        await close();
      } catch {
        // best effort
      }
    }
  }

  return {
    meta: {
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: availableParallelism(),
      mode: options.targets ? 'external' : 'embedded',
      serverArgs: options.serverArgs,
      options: {
        cases: options.cases,
        paths: options.paths,
        modes: options.modes,
        concurrency: options.concurrency,
        ratePerSecond: options.ratePerSecond,
        rateFraction: options.rateFraction,
        durationMs: options.durationMs,
        minRequests: options.minRequests,
        maxRequests: options.maxRequests,
        warmup: options.warmup,
        repeat: options.repeat,
        sharedDir: options.sharedDir,
        repoDir: options.repoDir,
        serverArgs: options.serverArgs,
        timeoutMs: options.timeoutMs,
        ...(options.targets ? { targets: options.targets } : {}),
      },
      durationS: (performance.now() - started) / 1000,
    },
    cases: caseReports,
    paths: PATHS,
    rows,
  };
}

function tensorsBytes(tensors: Readonly<Record<string, Tensor>>): number {
  let n = 0;
  for (const t of Object.values(tensors)) n += byteSize(t);
  return n;
}

/** Pools the samples of all rounds of one row. */
function aggregate(
  base: Pick<BenchRow, 'case' | 'path' | 'mode' | 'concurrency' | 'ratePerSecond'>,
  list: readonly Sample[],
  floor: { p50: number; p99: number } | undefined,
): BenchRow {
  const latencies = list.flatMap((s) => s.latenciesMs);
  const latency = summarize(latencies);
  const n = latencies.length;
  const wall = list.reduce((a, s) => a + s.wallMs, 0);
  const errors = list.reduce((a, s) => a + s.errors, 0);
  const sum = (f: (s: Sample) => number | undefined): number | undefined => {
    let total = 0;
    for (const s of list) {
      const v = f(s);
      if (v === undefined) return undefined;
      total += v;
    }
    return total;
  };
  const client = sum((s) => s.clientCpuMs);
  const server = sum((s) => s.serverCpuMs);
  const done = n + errors;
  const wire = list.find((s) => s.wire !== undefined)?.wire;
  const firstError = list.find((s) => s.firstError !== undefined)?.firstError;
  return {
    ...base,
    latency,
    roundP50s: list.map((s) => summarize(s.latenciesMs).p50),
    throughput: (n * 1000) / wall,
    errors,
    ...(firstError !== undefined ? { firstError } : {}),
    ...(wire ? { requestBytes: wire.requestBytes, responseBytes: wire.responseBytes } : {}),
    ...(client !== undefined && done > 0 ? { clientCpuMsPerRequest: client / done } : {}),
    ...(server !== undefined && done > 0 ? { serverCpuMsPerRequest: server / done } : {}),
    ...(floor ? { ratioP50: latency.p50 / floor.p50, ratioP99: latency.p99 / floor.p99 } : {}),
  };
}
