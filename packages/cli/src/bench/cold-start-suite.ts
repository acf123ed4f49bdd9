/**
 * First requests after a server start: time from spawning `visionserve serve` to its
 * "ready" line, then per case one GetModelStatus (opens the connection, so the first
 * Predict carries no HTTP/2 handshake), the first Predict, and more to reach the steady
 * state. Once with the model warmup (the default), once with --enable_model_warmup=false.
 */
import { type TensorEncoding, createTfsGrpcClient } from '@visionserve/client';
import type { BenchCase } from './bench-cases.js';
import type { BenchProgress } from './bench-progress.js';
import type { ColdStartReport, ColdStartRow } from './bench-results.js';
import type { ExitCleanup } from './exit-cleanup.js';
import { startServerProcess } from './server-process.js';
import { summarize } from './stats.js';

export interface ColdStartSuiteOptions {
  readonly cases: readonly BenchCase[];
  /** Predict calls per case after the first (at least 2); the steady p50 is over the last two thirds. */
  readonly requests: number;
  /** Request encoding; `tensor_content` also starts the server with --enable_serialization_as_tensor_content. */
  readonly encoding: TensorEncoding;
  /** `visionserve serve` flags (model config file, --server-arg values). */
  readonly serverFlags: readonly string[];
  readonly timeoutMs: number;
  readonly cleanup: ExitCleanup;
  readonly progress: BenchProgress;
}

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export async function runColdStartSuite(o: ColdStartSuiteOptions): Promise<ColdStartReport> {
  const extra = o.encoding === 'tensor_content' ? ['--enable_serialization_as_tensor_content'] : [];
  const requests = Math.max(2, o.requests);
  const rows: ColdStartRow[] = [];
  for (const warmup of [true, false]) {
    const which = `warmup ${warmup ? 'on' : 'off'}`;
    o.progress.step(`cold-start · ${which} · starting server`);
    const t0 = performance.now();
    let server;
    try {
      server = await startServerProcess(
        [...o.serverFlags, ...extra, ...(warmup ? [] : ['--enable_model_warmup=false'])],
        { cleanup: o.cleanup },
      );
    } catch (error) {
      for (const c of o.cases) {
        o.progress.step(`cold-start · ${which} · ${c.id} · skipped`);
        rows.push({ case: c.id, warmup, skipped: `server did not start: ${errorText(error)}` });
      }
      continue;
    }
    const startMs = performance.now() - t0;
    const client = createTfsGrpcClient({
      address: `127.0.0.1:${server.grpcPort}`,
      encoding: o.encoding,
      defaultTimeoutMs: o.timeoutMs,
    });
    try {
      for (const c of o.cases) {
        o.progress.step(`cold-start · ${which} · ${c.id}`);
        try {
          await client.getModelStatus(c.model);
          const predict = async (): Promise<number> => {
            const s = performance.now();
            await client.predict(c.model, c.inputs);
            return performance.now() - s;
          };
          const firstMs = await predict();
          const later: number[] = [];
          for (let i = 0; i < requests; i++) later.push(await predict());
          rows.push({
            case: c.id,
            warmup,
            startMs,
            firstMs,
            secondMs: later[0]!,
            steadyP50Ms: summarize(later.slice(Math.floor(later.length / 3))).p50,
          });
        } catch (error) {
          rows.push({ case: c.id, warmup, startMs, skipped: `failed: ${errorText(error)}` });
        }
      }
    } finally {
      client.close();
      await server.stop();
    }
  }
  return {
    requests,
    serverArgs: [...o.serverFlags.filter((f) => !f.startsWith('--model_config_file=')), ...extra],
    rows,
  };
}
