/**
 * The benchmark: load loops (closed/open, coordinated-omission accounting), the chart and
 * a short end-to-end run of `runBench` (floor, in-process, gRPC tensor_content and the
 * /invocations row that is skipped while the server has no listener).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { closedLoop, openLoop } from '../src/bench/load-loop.js';
import { percentile, summarize } from '../src/bench/stats.js';
import { runBench } from '../src/bench/run-bench.js';
import { formatMarkdown } from '../src/bench/bench-report.js';
import { formatChart } from '../src/bench/bench-chart.js';
import { SHARED } from './helpers/shared.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('load loops', () => {
  it('closed loop: respects min/max requests and concurrency', async () => {
    let inFlight = 0;
    let peak = 0;
    const send = async (): Promise<void> => {
      peak = Math.max(peak, ++inFlight);
      await sleep(5);
      inFlight--;
    };
    const r = await closedLoop(send, 3, { durationMs: 0, minRequests: 7, maxRequests: 100 });
    assert.ok(r.latenciesMs.length >= 7 && r.latenciesMs.length <= 9, String(r.latenciesMs.length));
    assert.equal(peak, 3);
    const capped = await closedLoop(send, 1, { durationMs: 10_000, minRequests: 1, maxRequests: 4 });
    assert.equal(capped.latenciesMs.length, 4);
  });

  it('open loop: latency counts from the scheduled send time (no coordinated omission)', async () => {
    // A server that handles one request at a time in 40 ms, offered 50 req/s (one per 20 ms):
    // each request waits longer than the previous one.
    let queue = Promise.resolve();
    const send = (): Promise<void> => {
      const done = queue.then(() => sleep(40));
      queue = done;
      return done;
    };
    const r = await openLoop(send, 50, { durationMs: 200, minRequests: 10, maxRequests: 10 });
    assert.equal(r.latenciesMs.length, 10);
    const last = r.latenciesMs[r.latenciesMs.length - 1]!;
    assert.ok(last > 200, `queueing must show in the latency: last ${last} ms`);
    const closed = await closedLoop(send, 1, { durationMs: 0, minRequests: 5, maxRequests: 5 });
    assert.ok(summarize(closed.latenciesMs).max < 120);
  });

  it('percentiles are nearest-rank', () => {
    const s = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(s, 50), 50);
    assert.equal(percentile(s, 99), 99);
    assert.equal(percentile(s, 100), 100);
    assert.ok(Number.isNaN(percentile([], 50)));
  });
});

describe('runBench (short)', () => {
  it('measures floor, in-process, gRPC and /invocations rows, writes table and chart', async () => {
    const report = await runBench({
      cases: ['mobilenet'],
      paths: ['floor', 'in-process', 'grpc-tensor-content', 'invocations'],
      modes: ['closed', 'open'],
      concurrency: 1,
      ratePerSecond: undefined,
      rateFraction: 0.5,
      durationMs: 200,
      minRequests: 3,
      maxRequests: 20,
      warmup: 1,
      repeat: 1,
      sharedDir: SHARED,
      repoDir: undefined,
      targets: undefined,
      serverArgs: ['--model_instances=1'],
      timeoutMs: 30_000,
    });
    const row = (path: string, mode = 'closed') =>
      report.rows.find((r) => r.path === path && r.mode === mode);
    assert.equal(row('floor')?.ratioP50, 1);
    for (const path of ['in-process', 'grpc-tensor-content', 'invocations']) {
      for (const mode of ['closed', 'open']) {
        const r = row(path, mode);
        assert.ok(r?.latency && r.latency.n >= 3, `${path} ${mode}: ${JSON.stringify(r)}`);
        assert.ok(r.ratioP50! > 0.5, `${path} ratio ${r.ratioP50!}`);
      }
    }
    assert.ok(row('grpc-tensor-content')!.requestBytes! > 600_000);
    assert.ok(row('grpc-tensor-content')!.serverCpuMsPerRequest! > 0);
    assert.ok(row('grpc-tensor-content', 'open')!.ratePerSecond! > 0);
    assert.ok(row('invocations')!.responseBytes! > 0, 'top-5 JSON came back');
    const md = formatMarkdown(report);
    assert.match(md, /\| gRPC tensor_content \| [\d.]+ \|/);
    assert.match(md, /Open loop at a fixed arrival rate/);
    const svg = formatChart(report);
    assert.ok(svg.startsWith('<svg') && svg.trimEnd().endsWith('</svg>'));
    assert.equal(svg.match(/<svg/g)?.length, 1);
    assert.match(svg, /gRPC tensor_content/);
  });
});
