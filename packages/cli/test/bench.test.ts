/**
 * The benchmark: load loops (closed/open, coordinated-omission accounting), its units
 * (path runners, row pooling, sweep layouts, suites, the plan and step labels, exit
 * clean-up, command-line parsing, the report) and short end-to-end runs of `runBench`:
 * the latency suite (floors, image floor, in-process, gRPC, /invocations) and the sweep
 * and cold-start suites, each leaving no temporary folder behind.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { closedLoop, openLoop, warmUp } from '../src/bench/load-loop.js';
import { percentile, summarize } from '../src/bench/stats.js';
import { type BenchOptions, planFor, runBench } from '../src/bench/run-bench.js';
import { formatMarkdown } from '../src/bench/bench-report.js';
import { formatChart } from '../src/bench/bench-chart.js';
import { aggregateSamples, floorReference } from '../src/bench/aggregate-samples.js';
import { createSendRunner, type Sample } from '../src/bench/path-runner.js';
import {
  batchingParametersText,
  describeSweepConfig,
  parseSweepConfig,
  sweepServerFlags,
} from '../src/bench/sweep-configs.js';
import { parseSuites } from '../src/bench/bench-suites.js';
import { closedBlockS, createStepCounter, formatDuration, planLatency } from '../src/bench/bench-plan.js';
import { createExitCleanup } from '../src/bench/exit-cleanup.js';
import { parseBenchArgs } from '../src/bench-command.js';
import { createGcTrace, gcBetween } from '../src/bench/server-gc.js';
import { UsageError, createProgress } from '../src/cli-args.js';
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

  it('warm-up sends its requests, then keeps going until the minimum time has passed (never with 0 requests)', async () => {
    let sent = 0;
    const send = async (): Promise<void> => {
      sent++;
      await new Promise((r) => setTimeout(r, 5));
    };
    const start = performance.now();
    await warmUp(send, 2, 60);
    assert.ok(performance.now() - start >= 60 && sent > 2, `${sent} sent`);
    sent = 0;
    await warmUp(send, 3);
    assert.equal(sent, 3);
    sent = 0;
    await warmUp(send, 0, 60);
    assert.equal(sent, 0);
  });

  it('percentiles are nearest-rank', () => {
    const s = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(s, 50), 50);
    assert.equal(percentile(s, 99), 99);
    assert.equal(percentile(s, 100), 100);
    assert.ok(Number.isNaN(percentile([], 50)));
  });
});

describe('path runner (send-based)', () => {
  it('warms up, runs closed and open blocks, keeps the last wire bytes and measures CPU', async () => {
    let calls = 0;
    const runner = createSendRunner({
      send: async () => {
        calls++;
        await sleep(2);
        return { requestBytes: 10, responseBytes: calls };
      },
      serverPid: process.pid,
    });
    const limits = { durationMs: 0, minRequests: 4, maxRequests: 4 };
    const closed = await runner.runBlock({
      mode: 'closed',
      concurrency: 2,
      ratePerSecond: 0,
      warmup: 3,
      ...limits,
    });
    assert.equal(calls, 7, '3 warm-up + 4 timed requests');
    assert.equal(closed.latenciesMs.length, 4);
    assert.equal(closed.wire?.responseBytes, 7);
    assert.equal(closed.ratePerSecond, undefined);
    assert.ok(closed.clientCpuMs! >= 0);
    assert.ok(closed.serverCpuMs === undefined || closed.serverCpuMs >= 0, 'from /proc where it exists');
    const open = await runner.runBlock({
      mode: 'open',
      concurrency: 1,
      ratePerSecond: 200,
      warmup: 0,
      ...limits,
    });
    assert.equal(open.latenciesMs.length, 4);
    assert.equal(open.ratePerSecond, 200);
  });

  it('counts failed requests without stopping the block', async () => {
    let i = 0;
    const runner = createSendRunner({
      send: () => (++i % 2 === 0 ? Promise.reject(new Error('boom')) : Promise.resolve(undefined)),
    });
    const s = await runner.runBlock({
      mode: 'closed',
      concurrency: 1,
      ratePerSecond: 0,
      warmup: 0,
      durationMs: 0,
      minRequests: 6,
      maxRequests: 6,
    });
    assert.equal(s.latenciesMs.length, 3);
    assert.equal(s.errors, 3);
    assert.equal(s.firstError, 'boom');
    assert.equal(s.serverCpuMs, undefined, 'no server pid, no server CPU');
  });
});

describe('row pooling', () => {
  const sample = (latencies: number[], extra: Partial<Sample> = {}): Sample => ({
    latenciesMs: latencies,
    errors: 0,
    firstError: undefined,
    wallMs: latencies.reduce((a, b) => a + b, 0),
    clientCpuMs: 1,
    serverCpuMs: 2,
    wire: { requestBytes: 100, responseBytes: 5 },
    ratePerSecond: undefined,
    ...extra,
  });
  const key = {
    case: 'mobilenet',
    path: 'grpc-typed',
    mode: 'closed',
    concurrency: 1,
    ratePerSecond: undefined,
  } as const;

  it('pools rounds, divides CPU by requests done and compares with both floors', () => {
    const row = aggregateSamples(
      key,
      [sample([10, 10, 10]), sample([20, 20], { errors: 1, firstError: 'x' })],
      { p50: 5, p99: 10 },
      { p50: 8, p99: 16 },
    );
    assert.equal(row.latency!.n, 5);
    assert.deepEqual(row.roundP50s, [10, 20]);
    assert.equal(row.errors, 1);
    assert.equal(row.firstError, 'x');
    assert.equal(row.throughput, (5 * 1000) / 70);
    assert.equal(row.clientCpuMsPerRequest, 2 / 6);
    assert.equal(row.serverCpuMsPerRequest, 4 / 6);
    assert.equal(row.ratioP50, row.latency!.p50 / 5);
    assert.equal(row.ratioImageFloorP99, row.latency!.p99 / 16);
    assert.equal(row.requestBytes, 100);
  });

  it('leaves CPU out when a block lacks it; floor references are medians of block percentiles', () => {
    const row = aggregateSamples(key, [sample([1]), sample([2], { serverCpuMs: undefined })], undefined);
    assert.equal(row.serverCpuMsPerRequest, undefined);
    assert.equal(row.ratioP50, undefined);
    const ref = floorReference([sample([1, 1, 1]), sample([3, 3, 3]), sample([2, 2, 100])]);
    assert.deepEqual(ref.p50s, [1, 3, 2]);
    assert.equal(ref.p50, 2);
    assert.equal(ref.p99, 3);
  });
});

describe('sweep layouts and suites', () => {
  it('parses layouts, writes batching files and server flags', () => {
    const plain = parseSweepConfig('2x1');
    assert.deepEqual(plain, { name: '2x1', instances: 2, intraOpThreads: 1, batching: undefined });
    assert.deepEqual(sweepServerFlags(plain, undefined), [
      '--model_instances=2',
      '--tensorflow_intra_op_parallelism=1',
    ]);
    assert.equal(describeSweepConfig(plain), '2 × 1');
    const batched = parseSweepConfig('2x1+b1ms');
    assert.deepEqual(batched.batching, { maxBatchSize: 8, timeoutMicros: 1000, batchThreads: 2 });
    assert.equal(describeSweepConfig(batched), '2 × 1 + batching (max 8, timeout 1 ms)');
    assert.equal(parseSweepConfig('1x2+b500us').batching!.timeoutMicros, 500);
    assert.equal(parseSweepConfig('1x2+b0').batching!.timeoutMicros, 0);
    assert.match(batchingParametersText(batched.batching), /batch_timeout_micros \{ value: 1000 \}/);
    assert.match(batchingParametersText(batched.batching), /num_batch_threads \{ value: 2 \}/);
    assert.deepEqual(sweepServerFlags(batched, '/tmp/b.pbtxt').slice(2), [
      '--enable_batching',
      '--batching_parameters_file=/tmp/b.pbtxt',
    ]);
    assert.throws(() => sweepServerFlags(batched, undefined), /batching file/);
    const spinning = parseSweepConfig('1x2+spin');
    assert.equal(spinning.spin, true);
    assert.deepEqual(sweepServerFlags(spinning, undefined), [
      '--model_instances=1',
      '--tensorflow_intra_op_parallelism=2',
      '--ort_allow_spinning=true',
    ]);
    assert.equal(describeSweepConfig(spinning), '1 × 2 spinning');
    assert.equal(parseSweepConfig('2x1+b0+spin').batching!.timeoutMicros, 0);
    for (const bad of ['2', '0x1', '2x1+', '2x1+b', '2x1+b1s', 'x', '100x1', '2x1+spin+b0', '2x1+spinning'])
      assert.throws(() => parseSweepConfig(bad), /must look like/, bad);
  });

  it('parses --suite lists in canonical order', () => {
    assert.deepEqual(parseSuites('all'), ['latency', 'sweep', 'cold-start', 'overload', 'stream']);
    assert.deepEqual(parseSuites('overload,latency'), ['latency', 'overload']);
    assert.deepEqual(parseSuites('cold-start,latency'), ['latency', 'cold-start']);
    assert.equal(parseSuites('latency,nope'), undefined);
    assert.equal(parseSuites(' , '), undefined);
  });
});

describe('plan and progress', () => {
  it('stretches blocks whose minimum requests outlast the duration, and counts steps', () => {
    const limits = { durationMs: 3000, minRequests: 5, maxRequests: 500, warmup: 3 };
    assert.equal(closedBlockS(10, 1, limits), 3.01);
    assert.equal(closedBlockS(4000, 1, limits), 24);
    assert.equal(closedBlockS(10, 1, { ...limits, maxRequests: 100 }), 1.01, 'capped by maxRequests');
    const plan = planLatency({
      ...limits,
      cases: ['mobilenet', 'raw_detector'],
      paths: ['floor', 'image-floor', 'rest-json', 'invocations'],
      modes: ['closed', 'open'],
      concurrency: 1,
      rateFraction: 0.5,
      repeat: 2,
      external: true,
    });
    // Per case and round: 2 floors × 2 blocks + 2 paths × 2 modes.
    assert.equal(plan.steps, 2 * 2 * (4 + 4));
    // raw_detector's REST JSON alone: closed 2 × 24 s + open 2 × 44 s (min requests at half the rate).
    assert.ok(plan.estimateS > 130 && plan.estimateS < 200, String(plan.estimateS));
    assert.equal(formatDuration(347), '5 min 47 s');
    assert.equal(formatDuration(42.4), '42 s');
  });

  it('labels steps with elapsed and remaining time', () => {
    let now = 0;
    const counter = createStepCounter(4, 100, () => now);
    assert.equal(counter.next('a'), '[1/4, 0:00 elapsed, ~1:40 left] a');
    now = 70_000;
    assert.equal(counter.current('a · 5 req'), '[1/4, 1:10 elapsed, ~0:30 left] a · 5 req');
    now = 130_000;
    assert.equal(counter.next('b'), '[2/4, 2:10 elapsed] b', 'no "left" once past the estimate');
  });

  it('prints steps as lines when stderr is not a terminal', () => {
    const written: string[] = [];
    const stream = { isTTY: false, columns: 80, write: (s: string) => written.push(s) };
    const p = createProgress(stream as unknown as NodeJS.WriteStream);
    p.update('tick');
    p.step('[1/2] step');
    p.done();
    assert.deepEqual(written, ['[1/2] step\n']);
    const tty: string[] = [];
    const t = createProgress({
      isTTY: true,
      columns: 80,
      write: (s: string) => tty.push(s),
    } as unknown as NodeJS.WriteStream);
    t.step('x');
    t.done();
    assert.deepEqual(tty, ['\r\x1b[Kx', '\r\x1b[K']);
  });
});

describe('exit clean-up', () => {
  it('runs each action once, in reverse order, and removes its handlers', () => {
    const before = process.listenerCount('SIGINT');
    const cleanup = createExitCleanup();
    assert.equal(process.listenerCount('SIGINT'), before + 1);
    const order: string[] = [];
    cleanup.add(() => order.push('a'));
    const remove = cleanup.add(() => order.push('b'));
    cleanup.add(() => {
      order.push('c');
      throw new Error('ignored');
    });
    remove();
    cleanup.runAll();
    cleanup.runAll();
    assert.deepEqual(order, ['c', 'a']);
    cleanup.dispose();
    assert.equal(process.listenerCount('SIGINT'), before);
  });

  it('removes a folder when the process gets SIGINT, and dies of the signal', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'visionserve-bench-test-'));
    const dir = join(parent, 'visionserve-bench-x');
    const moduleUrl = pathToFileURL(join(import.meta.dirname, '..', 'src', 'bench', 'exit-cleanup.js')).href;
    const script = `
      import { mkdirSync, rmSync } from 'node:fs';
      import { createExitCleanup } from ${JSON.stringify(moduleUrl)};
      const dir = ${JSON.stringify(dir)};
      mkdirSync(dir);
      createExitCleanup().add(() => rmSync(dir, { recursive: true, force: true }));
      setInterval(() => undefined, 1000);
      process.stdout.write('ready\\n');`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.once('data', () => {
          resolve();
        });
        child.once('exit', (code) => {
          reject(new Error(`child exited early (${String(code)})`));
        });
      });
      assert.ok(existsSync(dir));
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        child.once('exit', (_code, signal) => {
          resolve(signal);
        }),
      );
      child.kill('SIGINT');
      assert.equal(await exited, 'SIGINT');
      assert.equal(existsSync(dir), false, 'folder removed on Ctrl-C');
    } finally {
      child.kill('SIGKILL');
      await rm(parent, { recursive: true, force: true });
    }
  });
});

describe('visionserve bench arguments', () => {
  it('finds ../shared beside the repository by default (npm run bench passes no --shared)', () => {
    assert.equal(parseBenchArgs([]).options.sharedDir, resolve(SHARED));
  });
  it('defaults to the latency suite and parses the sweep and cold-start options', () => {
    const d = parseBenchArgs([]);
    assert.deepEqual(d.options.suites, ['latency']);
    assert.equal(d.options.cases, undefined, 'each suite picks its default cases');
    assert.equal(d.options.paths.length, 14);
    assert.ok(
      d.options.paths.includes('kserve-http') &&
        d.options.paths.includes('kserve-json') &&
        d.options.paths.includes('kserve-grpc') &&
        d.options.paths.includes('grpc-tls') &&
        d.options.paths.includes('kserve-https'),
    );
    assert.equal(d.planOnly, false);
    const a = parseBenchArgs([
      '--suite=all',
      '--cases=mobilenet',
      '--configs=1x1,2x1+b0',
      '--sweep-concurrency=1,8',
      '--sweep-encoding=typed',
      '--cold-requests=9',
      '--plan',
    ]);
    assert.deepEqual(a.options.suites, ['latency', 'sweep', 'cold-start', 'overload', 'stream']);
    assert.deepEqual(
      a.options.sweep?.configs?.map((c) => c.name),
      ['1x1', '2x1+b0'],
    );
    assert.deepEqual(a.options.sweep?.concurrencies, [1, 8]);
    assert.equal(a.options.sweep?.encoding, 'typed');
    assert.equal(a.options.coldStartRequests, 9);
    assert.equal(a.planOnly, true);
    const plan = planFor(a.options);
    assert.ok(plan.latency && plan.sweep && plan.coldStart);
    assert.equal(plan.sweep.steps, 2 * (1 + 1 * 2) + 2);
    assert.equal(plan.coldStart.steps, 2 * (1 + 1));
    assert.equal(plan.stream?.steps, 4);
  });

  it('rejects bad values with usage errors', () => {
    for (const args of [
      ['--suite=fast'],
      ['--cases=resnet'],
      ['--paths=carrier-pigeon'],
      ['--configs=2by1'],
      ['--sweep-concurrency=0'],
      ['--sweep-encoding=json'],
      ['--cold-requests=1'],
      ['--suite=sweep', '--grpc=127.0.0.1:8500'],
      ['--server-pid=12'],
      ['extra'],
    ])
      assert.throws(() => parseBenchArgs(args), UsageError, args.join(' '));
  });
});

/** A fresh parent for the run's temporary folder, so that its removal can be checked. */
async function tempRoot(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'visionserve-bench-test-'));
}

const SHORT: Omit<BenchOptions, 'paths'> = {
  cases: ['mobilenet'],
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
  // Nothing shed: a slow moment of a busy box must not turn the open-loop rows into errors.
  serverArgs: ['--model_instances=1', '--max_queue_wait_ms=0'],
  timeoutMs: 30_000,
};

describe('runBench (short)', () => {
  it('latency suite: floors, in-process, gRPC, /invocations and TLS rows, table and chart; no folder left', async () => {
    const root = await tempRoot();
    const steps: string[] = [];
    let planned = 0;
    try {
      const report = await runBench({
        ...SHORT,
        paths: [
          'floor',
          'image-floor',
          'in-process',
          'grpc-tensor-content',
          'invocations',
          'grpc-tls',
          'kserve-https',
        ],
        tempRoot: root,
        onPlan: (p) => {
          planned = p.steps;
        },
        onStep: (text) => steps.push(text),
      });
      assert.deepEqual(await readdir(root), [], 'temporary folder removed');
      assert.equal(steps.length, planned, 'every planned step reported');
      assert.match(steps.at(-1)!, new RegExp(`^\\[${planned}/${planned}, `));
      const row = (path: string, mode = 'closed') =>
        report.rows.find((r) => r.path === path && r.mode === mode);
      assert.equal(row('floor')?.ratioP50, 1);
      // Ratios are checked as arithmetic, not as timings: on a busy 2-core box one floor block
      // can take 10× another (measured: p50s of 265 and 25 ms in one run), so a path measured
      // in a quiet moment may show half the floor's latency; the bench reports that, it is no bug.
      const floorP50 = report.cases[0]!.floorP50;
      assert.ok(Number.isFinite(floorP50) && floorP50 > 0, String(floorP50));
      for (const path of ['in-process', 'grpc-tensor-content', 'invocations', 'grpc-tls', 'kserve-https']) {
        for (const mode of ['closed', 'open']) {
          const r = row(path, mode);
          assert.ok(
            r?.latency && r.latency.n >= 3 && r.errors === 0,
            `${path} ${mode}: ${JSON.stringify(r)}`,
          );
          assert.ok(r.latency.p50 > 0, `${path} ${mode} p50 ${r.latency.p50}`);
          assert.equal(r.ratioP50, r.latency.p50 / floorP50, `${path} ${mode} ratio`);
        }
      }
      assert.ok(row('grpc-tensor-content')!.requestBytes! > 600_000);
      // Over TLS the same message goes out; the server measured is the TLS one.
      assert.equal(row('grpc-tls')!.requestBytes, row('grpc-tensor-content')!.requestBytes);
      assert.ok(row('kserve-https')!.serverCpuMsPerRequest! > 0);
      assert.ok(row('grpc-tensor-content')!.serverCpuMsPerRequest! > 0);
      assert.ok(row('grpc-tensor-content', 'open')!.ratePerSecond! > 0);
      assert.ok(row('invocations')!.responseBytes! > 0, 'top-5 JSON came back');
      // The image floor decodes the JPEG too (its answer is the photo's top 5); its row compares
      // with the ORT floor, /invocations compares with it.
      const imageFloor = report.cases[0]!.imageFloor!;
      assert.ok(imageFloor.p50 > 0, JSON.stringify(imageFloor));
      assert.equal(row('image-floor')!.ratioP50, imageFloor.p50 / floorP50);
      const invocations = row('invocations')!;
      assert.equal(invocations.ratioImageFloorP50, invocations.latency!.p50 / imageFloor.p50);
      const answer = JSON.parse(imageFloor.answer!) as {
        predictions: { class_id: number; label: string }[][];
      };
      assert.equal(answer.predictions[0]!.length, 5);
      assert.ok(answer.predictions[0]!.every((p) => typeof p.label === 'string'));
      const md = formatMarkdown(report);
      assert.match(md, /\| gRPC tensor_content \| [\d.]+ \|/);
      assert.match(md, /Open loop at a fixed arrival rate/);
      assert.match(md, /\/invocations against the image floor/);
      const svg = formatChart(report);
      assert.ok(svg.startsWith('<svg') && svg.trimEnd().endsWith('</svg>'));
      assert.equal(svg.match(/<svg/g)?.length, 1);
      // Labels wrap onto two lines as bar groups narrow.
      assert.match(svg, /tensor_content/);
      assert.match(svg, /over TLS/);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('sweep and cold-start suites: a batching layout at two concurrencies, first requests with and without warmup', async () => {
    const root = await tempRoot();
    try {
      const report = await runBench({
        ...SHORT,
        suites: ['sweep', 'cold-start'],
        paths: [],
        serverArgs: [],
        sweep: { configs: [parseSweepConfig('1x1+b0')], concurrencies: [1, 3] },
        coldStartRequests: 3,
        tempRoot: root,
      });
      assert.deepEqual(await readdir(root), [], 'temporary folder removed');
      assert.equal(report.rows.length, 0, 'no latency suite');
      const sweep = report.sweep!;
      assert.equal(sweep.rows.length, 2);
      for (const r of sweep.rows) {
        assert.equal(r.skipped, undefined, JSON.stringify(r));
        assert.ok(r.throughput! > 0 && r.latency!.n >= 3 && r.errors === 0, JSON.stringify(r));
        assert.ok(r.batching?.timeoutMicros === 0);
      }
      assert.ok(sweep.floors[0]!.before.p50 > 0 && sweep.floors[0]!.after.p50 > 0);
      assert.deepEqual(sweep.serverArgs, [
        '--max_queue_wait_ms=0',
        '--enable_serialization_as_tensor_content',
      ]);
      const cold = report.coldStart!;
      assert.deepEqual(
        cold.rows.map((r) => r.warmup),
        [true, false],
      );
      for (const r of cold.rows) {
        assert.equal(r.skipped, undefined, JSON.stringify(r));
        assert.ok(
          r.startMs! > 0 && r.firstMs! > 0 && r.secondMs! > 0 && r.steadyP50Ms! > 0,
          JSON.stringify(r),
        );
      }
      const md = formatMarkdown(report);
      assert.match(md, /### Throughput sweep/);
      assert.match(md, /\| MobileNetV2 int8 \| 1 × 1 \+ batching \(max 8, timeout 0\) \| \d+ \(/);
      assert.match(md, /### First requests after a load/);
      assert.doesNotMatch(md, /### Latency suite/);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('overload suite (smoke): capacity, open loop at 10x, refusals only as UNAVAILABLE / RESOURCE_EXHAUSTED or 503 / 429, never a reset; no folder left', async () => {
    const root = await tempRoot();
    const steps: string[] = [];
    let planned = 0;
    try {
      const report = await runBench({
        ...SHORT,
        suites: ['overload'],
        paths: [],
        // A short queue limit and 10x the measured capacity, so that the 1 s open loop surely
        // sheds. Capacity is measured in 300 ms at c=2 (2-4 requests on a busy box) while the
        // machine's speed swings several-fold within seconds; with the seeded arrivals (the
        // third comes 0.75 mean gaps after the first) the loop sheds only if the first request
        // is still running then: at 3x, a capacity under-measured 4x offered no overload at all.
        serverArgs: ['--model_instances=1', '--max_queue_wait_ms=50'],
        overload: {
          factor: 10,
          capacityConcurrencies: [2],
          capacityDurationMs: 300,
          settleMs: 200,
          durationMs: 1000,
          afterMs: 0,
        },
        tempRoot: root,
        onPlan: (p) => {
          planned = p.steps;
        },
        onStep: (text) => steps.push(text),
      });
      assert.deepEqual(await readdir(root), [], 'temporary folder removed');
      assert.equal(steps.length, planned, 'every planned step reported');
      const o = report.overload!;
      assert.equal(o.factor, 10);
      assert.deepEqual(
        o.runs.map((r) => r.protocol),
        ['grpc', 'rest'],
      );
      const refusals: Record<string, readonly string[]> = {
        grpc: ['UNAVAILABLE', 'RESOURCE_EXHAUSTED'],
        rest: ['HTTP 503', 'HTTP 429'],
      };
      for (const r of o.runs) {
        const what = JSON.stringify({ ...r, capacity: undefined });
        assert.equal(r.skipped, undefined, what);
        assert.ok(r.capacity!.throughput > 0 && r.capacity!.points.length === 1, JSON.stringify(r.capacity));
        assert.ok(r.requestBytes! > 600_000);
        const open = r.open!;
        assert.equal(open.ratePerSecond, 10 * r.capacity!.throughput, what);
        assert.ok(open.sent > 0);
        const counted = Object.values(open.counts).reduce((a, b) => a + b, 0);
        const labelled = Object.values(open.labels).reduce((a, b) => a + b, 0);
        assert.equal(counted, open.sent);
        assert.equal(labelled, open.sent);
        // Every request is answered: OK or refused the agreed way; no reset, timeout or other error.
        assert.ok(open.counts.ok! > 0, what);
        assert.ok(open.counts.shed! + open.counts['shed-429']! > 0, `nothing was shed: ${what}`);
        assert.equal(open.counts.ok! + open.counts.shed! + open.counts['shed-429']!, open.sent, what);
        for (const label of Object.keys(open.labels))
          assert.ok(label === 'OK' || label === 'HTTP 200' || refusals[r.protocol]!.includes(label), what);
        for (const m of Object.keys(open.messages)) assert.match(m, /overloaded|deadline/i, what);
        assert.equal(open.rejection.n, open.counts.shed! + open.counts['shed-429']!);
        assert.ok(open.accepted.n === open.counts.ok && open.accepted.p99 > 0);
        assert.ok(r.rss!.idleMiB > 0 && r.rss!.peakMiB > 0 && r.rss!.afterMiB > 0, JSON.stringify(r.rss));
        assert.deepEqual(
          r.targets!.map((t) => t.id),
          ['goodput', 'accepted-p99', 'rejected-as-shed', 'rejection-time', 'rss-peak', 'rss-after'],
        );
        assert.equal(r.loadAverageBefore.length, 3);
      }
      const md = formatMarkdown(report);
      assert.match(md, /### Overload/);
      assert.match(md, /\| MobileNetV2 int8 gRPC \| [\d.]+ \(2\) \|/);
      assert.match(md, /\| goodput ≥ 80 % of capacity \| \*\*(PASS|FAIL)\*\*/);
      assert.match(
        md,
        /\| every request not answered OK gets UNAVAILABLE \/ RESOURCE_EXHAUSTED \| \*\*PASS\*\*/,
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('removes its temporary folder when the run fails', async () => {
    const root = await tempRoot();
    try {
      await assert.rejects(
        runBench({ ...SHORT, paths: ['floor'], sharedDir: join(root, 'no-such-shared'), tempRoot: root }),
        /ENOENT/,
      );
      assert.deepEqual(await readdir(root), []);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('server GC from --trace-gc', () => {
  it('counts pauses, incremental steps and major collections of every isolate, across chunk borders, memory-reducer collections apart', () => {
    const text = [
      '[1:0x1a]      109 ms: Scavenge 3.8 (4.0) -> 3.4 (5.0) MB, 0.50 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure; ',
      '[1:0x2b]      866 ms: Mark-Compact 124.6 (158.0) -> 99.6 (133.3) MB, 1.25 / 0.00 ms  (+ 4.5 ms in 58 steps since start of marking, biggest step 2.1 ms, walltime since start of marking 340 ms) (average mu = 1.000, current mu = 1.000) finalize incremental marking via stack guard; GC in old space requested',
      '[1:0x1a]      900 ms: Mark-Compact (reduce) 10.0 (12.0) -> 9.0 (11.0) MB, 2.00 / 0.00 ms  (average mu = 0.9, current mu = 0.9) low memory notification; GC in old space requested',
      '[1:0x2b]      950 ms: Mark-Compact (reduce) 300.0 (310.0) -> 20.0 (30.0) MB, 3.00 / 0.00 ms  (average mu = 0.9, current mu = 0.9) external memory pressure; GC in old space requested',
      '{"level":"info","msg":"not a gc line"}',
      '',
    ].join('\n');
    const trace = createGcTrace();
    for (let i = 0; i < text.length; i += 7) trace.feed(text.slice(i, i + 7));
    const t = trace.totals();
    assert.equal(t.majors, 2);
    assert.equal(t.minors, 1);
    assert.equal(t.reducers, 1);
    assert.ok(Math.abs(t.ms - (0.5 + 1.25 + 4.5 + 3)) < 1e-9, String(t.ms));
    assert.equal(t.reducerMs, 2);
    assert.deepEqual(gcBetween({ ms: 1, majors: 1, minors: 2, reducers: 0, reducerMs: 0 }, t), {
      ms: t.ms - 1,
      majors: 1,
      minors: -1,
      reducers: 1,
      reducerMs: 2,
    });
    assert.equal(gcBetween(undefined, t), undefined);
  });
});
