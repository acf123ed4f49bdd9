/**
 * The throughput sweep: for each server layout (instances × intra-op threads, batching on
 * or off) a fresh server process, and for each case and concurrency a timed closed loop of
 * gRPC Predict with batch-1 requests. The raw onnxruntime floor runs before and after.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type TensorEncoding, createTfsGrpcClient } from '@visionserve/client';
import type { OrtSessionSettings } from '@visionserve/server';
import { type BenchCase, type StagedRepository } from './bench-cases.js';
import { SWEEP_WARMUP_MS } from './bench-plan.js';
import type { BenchProgress } from './bench-progress.js';
import type { SweepReport, SweepRow } from './bench-results.js';
import type { ExitCleanup } from './exit-cleanup.js';
import { createGrpcRunner } from './grpc-runner.js';
import { createOrtFloor } from './ort-floor.js';
import { startServerProcess } from './server-process.js';
import { type LatencySummary, summarize } from './stats.js';
import { type SweepConfig, batchingParametersText, sweepServerFlags } from './sweep-configs.js';

/**
 * Closed loops at high concurrency measure what a layout can serve, not its load shedding:
 * no queue-wait limit unless a --server-arg (later, so it wins) sets one.
 */
const NO_SHEDDING = ['--max_queue_wait_ms=0'];

export interface SweepSuiteOptions {
  readonly cases: readonly BenchCase[];
  readonly configs: readonly SweepConfig[];
  /** Closed-loop concurrencies per point. */
  readonly concurrencies: readonly number[];
  /** Per point: a timed block of durationMs with at least minRequests (no upper bound). */
  readonly durationMs: number;
  readonly minRequests: number;
  /** Floor blocks: at most this many runs. */
  readonly maxRequests: number;
  /**
   * Request encoding; `tensor_content` also starts the servers with
   * --enable_serialization_as_tensor_content (typed float_val responses of YOLOX's 1.2 MB
   * output cost the server ~12 ms of event-loop CPU each, which would hide the layouts).
   */
  readonly encoding: TensorEncoding;
  /** Flags for every sweep server (model config file, --server-arg values); the layout's own follow. */
  readonly serverFlags: readonly string[];
  readonly repo: StagedRepository;
  /** Where the batching parameter files go. */
  readonly workDir: string;
  readonly floorSettings: OrtSessionSettings;
  readonly timeoutMs: number;
  readonly cleanup: ExitCleanup;
  readonly progress: BenchProgress;
}

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

async function measureFloors(o: SweepSuiteOptions, which: string): Promise<Map<string, LatencySummary>> {
  const out = new Map<string, LatencySummary>();
  for (const c of o.cases) {
    o.progress.step(`sweep · ${c.id} · floor (${which})`);
    const floor = await createOrtFloor(o.repo.modelPath(c.id), c.inputs, o.floorSettings);
    try {
      const r = await floor.measure({
        warmup: 10,
        durationMs: o.durationMs,
        minRuns: o.minRequests,
        maxRuns: o.maxRequests,
      });
      out.set(c.id, summarize(r.latenciesMs));
    } finally {
      await floor.close();
    }
  }
  return out;
}

export async function runSweepSuite(o: SweepSuiteOptions): Promise<SweepReport> {
  const extra = o.encoding === 'tensor_content' ? ['--enable_serialization_as_tensor_content'] : [];
  const before = await measureFloors(o, 'before');
  const rows: SweepRow[] = [];
  for (const config of o.configs) {
    let batchingFile: string | undefined;
    if (config.batching) {
      batchingFile = join(o.workDir, `batching-${config.name.replace(/[^\w.-]/g, '_')}.pbtxt`);
      await writeFile(batchingFile, batchingParametersText(config.batching));
    }
    const base = (c: BenchCase, concurrency: number) => ({
      case: c.id,
      config: config.name,
      instances: config.instances,
      intraOpThreads: config.intraOpThreads,
      batching: config.batching,
      concurrency,
    });
    o.progress.step(`sweep · ${config.name} · starting server`);
    let server;
    try {
      server = await startServerProcess(
        [...NO_SHEDDING, ...o.serverFlags, ...extra, ...sweepServerFlags(config, batchingFile)],
        {
          cleanup: o.cleanup,
        },
      );
    } catch (error) {
      for (const c of o.cases)
        for (const concurrency of o.concurrencies) {
          o.progress.step(`sweep · ${config.name} · ${c.id} · c=${concurrency} · skipped`);
          rows.push({ ...base(c, concurrency), skipped: `server did not start: ${errorText(error)}` });
        }
      continue;
    }

    const client = createTfsGrpcClient({
      address: `127.0.0.1:${server.grpcPort}`,
      encoding: o.encoding,
      defaultTimeoutMs: o.timeoutMs,
    });
    try {
      for (const c of o.cases) {
        const runner = createGrpcRunner({
          client,
          benchCase: c,
          encoding: o.encoding,
          serverPid: server.pid,
          serverGc: server.gc,
        });
        for (const concurrency of o.concurrencies) {
          const label = `sweep · ${config.name} · ${c.id} · c=${concurrency}`;
          o.progress.step(label);
          try {
            // Untimed: connections, JIT, batch queues filled at this concurrency.
            await runner.runBlock({
              mode: 'closed',
              concurrency,
              ratePerSecond: 0,
              warmup: 0,
              durationMs: Math.min(SWEEP_WARMUP_MS, o.durationMs),
              minRequests: concurrency,
              maxRequests: Number.MAX_SAFE_INTEGER,
            });
            const s = await runner.runBlock({
              mode: 'closed',
              concurrency,
              ratePerSecond: 0,
              warmup: 0,
              durationMs: o.durationMs,
              minRequests: Math.max(o.minRequests, concurrency),
              maxRequests: Number.MAX_SAFE_INTEGER,
              onProgress: (n) => {
                o.progress.tick(`${label} · ${n} req`);
              },
            });
            const n = s.latenciesMs.length;
            const done = n + s.errors;
            rows.push({
              ...base(c, concurrency),
              ...(n === 0 ? { skipped: `every request failed: ${s.firstError ?? 'unknown error'}` } : {}),
              latency: summarize(s.latenciesMs),
              throughput: s.wallMs > 0 ? (n * 1000) / s.wallMs : NaN,
              errors: s.errors,
              ...(s.firstError !== undefined ? { firstError: s.firstError } : {}),
              ...(s.clientCpuMs !== undefined && done > 0
                ? { clientCpuMsPerRequest: s.clientCpuMs / done }
                : {}),
              ...(s.serverCpuMs !== undefined && done > 0
                ? { serverCpuMsPerRequest: s.serverCpuMs / done }
                : {}),
              ...(s.serverGc !== undefined && done > 0
                ? {
                    serverGcMsPerRequest: s.serverGc.ms / done,
                    majorGcsPer1000: (s.serverGc.majors * 1000) / done,
                    serverReducerGcMsPerRequest: s.serverGc.reducerMs / done,
                  }
                : {}),
            });
          } catch (error) {
            rows.push({ ...base(c, concurrency), skipped: `failed: ${errorText(error)}` });
          }
        }
      }
    } finally {
      client.close();
      await server.stop();
    }
  }
  const after = await measureFloors(o, 'after');
  return {
    serverArgs: [
      ...NO_SHEDDING,
      ...o.serverFlags.filter((f) => !f.startsWith('--model_config_file=')),
      ...extra,
    ],
    encoding: o.encoding,
    concurrencies: o.concurrencies,
    durationMs: o.durationMs,
    floorIntraOpThreads: o.floorSettings.intraOpThreads,
    floors: o.cases.map((c) => ({
      case: c.id,
      title: c.title,
      before: before.get(c.id)!,
      after: after.get(c.id)!,
    })),
    rows,
  };
}
