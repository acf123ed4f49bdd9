/**
 * The overload suite's units: arrivals, the load generators' classification of answers
 * (against small local HTTP/2 and HTTP servers that answer each way), the targets, RSS
 * reading, the plan and the command-line options. The suite end to end runs in
 * bench.test.ts (short mode).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { arrivalTimes, messageKind, runOpenLoop } from '../src/bench/overload-loop.js';
import {
  type ShotResult,
  createGrpcShooter,
  createRestShooter,
  grpcOutcome,
  httpOutcome,
} from '../src/bench/overload-shooters.js';
import { OVERLOAD_LIMITS, evaluateOverloadTargets } from '../src/bench/overload-targets.js';
import { openLoopWindows } from '../src/bench/overload-windows.js';
import type { OverloadRun } from '../src/bench/bench-results.js';
import { readRssBytes, startRssSampler } from '../src/bench/process-memory.js';
import { isCpuList, pinnedCommand } from '../src/bench/cpu-affinity.js';
import { planOverload } from '../src/bench/bench-plan.js';
import { overloadRunSteps } from '../src/bench/overload-suite.js';
import { parseBenchArgs } from '../src/bench-command.js';
import { UsageError } from '../src/cli-args.js';

const fire = (shooter: { fire(done: (r: ShotResult) => void): void }): Promise<ShotResult> =>
  new Promise((resolve) => {
    shooter.fire(resolve);
  });

describe('overload arrivals', () => {
  it('fixed arrivals are evenly spaced; Poisson ones have the asked mean rate and are reproducible', () => {
    const fixed = arrivalTimes(100, 1000, 'fixed');
    assert.equal(fixed.length, 100);
    assert.ok(Math.abs(fixed[1]! - 10) < 1e-9 && fixed.at(-1)! < 1000);
    const poisson = arrivalTimes(1000, 20_000, 'poisson', 7);
    assert.ok(Math.abs(poisson.length - 20_000) < 20_000 * 0.03, String(poisson.length));
    assert.deepEqual(
      arrivalTimes(1000, 1000, 'poisson', 7),
      poisson.slice(0, arrivalTimes(1000, 1000, 'poisson', 7).length),
    );
    for (let i = 1; i < poisson.length; i++) assert.ok(poisson[i]! >= poisson[i - 1]!);
    assert.ok(poisson.at(-1)! < 20_000);
    // Gaps are exponential: about 63 % are shorter than the mean.
    let short = 0;
    for (let i = 1; i < poisson.length; i++) if (poisson[i]! - poisson[i - 1]! < 1) short++;
    assert.ok(Math.abs(short / poisson.length - (1 - Math.exp(-1))) < 0.02, String(short / poisson.length));
  });

  it('the open loop sends at the scheduled times whatever the answers, and records every outcome', async () => {
    let outstanding = 0;
    let i = 0;
    const outcomes: ShotResult[] = [
      { outcome: 'ok', label: 'OK', responseBytes: 10 },
      { outcome: 'shed', label: 'UNAVAILABLE', responseBytes: 0 },
      { outcome: 'timeout', label: 'timeout', responseBytes: 0 },
    ];
    const shooter = {
      fire(done: (r: ShotResult) => void) {
        outstanding++;
        const r = outcomes[i++ % 3]!;
        // Slow answers must not delay later sends.
        setTimeout(() => {
          outstanding--;
          done(r);
        }, 1000);
      },
      get outstanding() {
        return outstanding;
      },
      connections: 1,
      close: () => undefined,
    };
    const r = await runOpenLoop(shooter, { ratePerSecond: 100, durationMs: 300, arrivals: 'fixed' });
    assert.equal(r.scheduledMs.length, 30);
    assert.deepEqual(r.labels, { OK: 10, UNAVAILABLE: 10, timeout: 10 });
    assert.equal(r.peakOutstanding, 30, 'every request was sent before the first answer');
    assert.ok(Math.max(...r.sentMs) < Math.min(...r.doneMs));
    for (let k = 0; k < 30; k++) {
      assert.ok(r.sentMs[k]! >= r.scheduledMs[k]!, 'never early');
      assert.ok(r.doneMs[k]! - r.sentMs[k]! >= 990);
    }
  });
});

describe('overload load generators', () => {
  it('groups messages by kind (numbers as #)', () => {
    assert.equal(
      messageKind('model m has about 312 ms of queued work (limit 250.5 ms)'),
      'model m has about # ms of queued work (limit # ms)',
    );
  });

  it('maps statuses to outcomes', () => {
    assert.equal(grpcOutcome(0), 'ok');
    assert.equal(grpcOutcome(14), 'shed');
    assert.equal(grpcOutcome(8), 'shed');
    assert.equal(grpcOutcome(4), 'deadline');
    assert.equal(grpcOutcome(13), 'error');
    assert.equal(httpOutcome(200), 'ok');
    assert.equal(httpOutcome(503), 'shed');
    assert.equal(httpOutcome(429), 'shed-429');
    assert.equal(httpOutcome(504), 'deadline');
    assert.equal(httpOutcome(500), 'error');
  });

  it('gRPC: tells an answer, a refusal, a deadline, a reset stream and a timeout apart', async () => {
    const seen: { path: string; bytes: number; timeout: string }[] = [];
    const server = http2.createServer();
    server.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const body = Buffer.concat(chunks);
        const kind = body.subarray(5).toString();
        seen.push({
          path: String(headers[':path']),
          bytes: body.readUInt32BE(1),
          timeout: String(headers['grpc-timeout']),
        });
        if (kind === 'ok') {
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.once('wantTrailers', () => {
            stream.sendTrailers({ 'grpc-status': '0' });
          });
          stream.end(Buffer.from([0, 0, 0, 0, 3, 1, 2, 3]));
        } else if (kind === 'shed' || kind === 'late') {
          stream.respond(
            {
              ':status': 200,
              'content-type': 'application/grpc',
              'grpc-status': kind === 'shed' ? '14' : '4',
              'grpc-message': 'busy%20now',
            },
            { endStream: true },
          );
        } else if (kind === 'reset') {
          stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        }
        // 'hang': never answers.
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const shoot = (kind: string, timeoutMs = 5000) => {
        const shooter = createGrpcShooter({
          address: `127.0.0.1:${port}`,
          path: '/pkg.Service/Method',
          message: Buffer.from(kind),
          timeoutMs,
        });
        return fire(shooter).finally(() => {
          shooter.close();
        });
      };
      assert.deepEqual(await shoot('ok'), { outcome: 'ok', label: 'OK', responseBytes: 3 });
      assert.deepEqual(await shoot('shed'), {
        outcome: 'shed',
        label: 'UNAVAILABLE',
        responseBytes: 0,
        message: 'busy now',
      });
      assert.equal((await shoot('late')).label, 'DEADLINE_EXCEEDED');
      const reset = await shoot('reset');
      assert.equal(reset.outcome, 'error');
      assert.match(reset.label, /^transport: RST_STREAM 2$/);
      const started = performance.now();
      const hang = await shoot('hang', 100);
      assert.deepEqual(hang, { outcome: 'timeout', label: 'timeout', responseBytes: 0 });
      assert.ok(
        performance.now() - started >= 1000,
        'the local timeout leaves the server a second to answer',
      );
      assert.deepEqual(seen[0], { path: '/pkg.Service/Method', bytes: 2, timeout: '5000m' });
    } finally {
      server.close();
    }
  });

  it('REST: one keep-alive socket per outstanding request; 200, 503, 429, 500, a dropped connection and a timeout', async () => {
    const server = http.createServer((req, res) => {
      const kind = req.url!.slice(1);
      if (kind === 'shed') {
        // Refused before the body is read, as the server's admission does.
        res.writeHead(503, { 'retry-after': '1', connection: 'close' }).end('{"error":"overloaded"}');
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (kind === 'drop') req.socket.destroy();
        else if (kind === 'hang') return;
        else {
          const status = { ok: 200, busy: 429, fail: 500 }[kind] ?? 400;
          res.writeHead(status, { 'content-type': 'application/json' }).end(Buffer.concat(chunks));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const shooter = (path: string, timeoutMs = 5000) =>
        createRestShooter({
          address: `127.0.0.1:${port}`,
          path,
          body: Buffer.from('{"instances":[1,2,3]}'),
          timeoutMs,
        });
      const ok = shooter('/ok');
      const answers = await Promise.all([fire(ok), fire(ok), fire(ok)]);
      assert.deepEqual(answers[0], { outcome: 'ok', label: 'HTTP 200', responseBytes: 21 });
      assert.equal(ok.connections, 3, 'concurrent requests get their own sockets');
      await fire(ok);
      assert.equal(ok.connections, 3, 'and sockets are kept alive');
      ok.close();
      const one = async (path: string, timeoutMs?: number): Promise<ShotResult> => {
        const s = shooter(path, timeoutMs);
        try {
          return await fire(s);
        } finally {
          s.close();
        }
      };
      assert.deepEqual(await one('/shed'), {
        outcome: 'shed',
        label: 'HTTP 503',
        responseBytes: 22,
        message: '{"error":"overloaded"}',
      });
      assert.deepEqual(await one('/busy'), {
        outcome: 'shed-429',
        label: 'HTTP 429',
        responseBytes: 21,
        message: '{"instances":[1,2,3]}',
      });
      assert.equal((await one('/fail')).outcome, 'error');
      const dropped = await one('/drop');
      assert.equal(dropped.outcome, 'error');
      assert.match(dropped.label, /^transport: /);
      assert.deepEqual(await one('/hang', 100), { outcome: 'timeout', label: 'timeout', responseBytes: 0 });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe('overload targets', () => {
  const lat = (p50: number, p99: number, n = 100) => ({
    n,
    p50,
    p90: p99,
    p95: p99,
    p99,
    mean: p50,
    max: p99,
  });
  const run = (
    over: Partial<Record<string, unknown>> = {},
  ): Pick<OverloadRun, 'protocol' | 'capacity' | 'open' | 'rss'> => ({
    protocol: 'grpc',
    capacity: { points: [], throughput: 100, concurrency: 4, p50: 30, p99: 50 },
    open: {
      ratePerSecond: 300,
      arrivals: 'poisson',
      durationMs: 30_000,
      sent: 9000,
      counts: { ok: 2700, shed: 6300, 'shed-429': 0, deadline: 0, timeout: 0, error: 0 },
      labels: {},
      messages: {},
      goodput: 90,
      goodputRatio: 0.9,
      accepted: lat(60, 120),
      acceptedP99Ratio: 2.4,
      rejection: { ...lat(2, 10, 6300), max: 30 },
      sendLag: lat(1, 2),
      peakOutstanding: 30,
      connections: 1,
      clientCpuMsPerRequest: 0.1,
      generatorLoopDelayP99Ms: 2,
      generatorLoopDelayMaxMs: 5,
      wallMs: 30_100,
      ...(over.open as object),
    },
    rss: {
      startMiB: 150,
      idleMiB: 200,
      peakMiB: 260,
      afterMiB: 210,
      afterMs: 30_000,
      timeline: [],
      ...(over.rss as object),
    },
  });

  it('passes a run within every limit and names what failed otherwise', () => {
    const good = evaluateOverloadTargets(run(), 3);
    assert.deepEqual(
      good.map((t) => [t.id, t.pass]),
      [
        ['goodput', true],
        ['accepted-p99', true],
        ['rejected-as-shed', true],
        ['rejection-time', true],
        ['rss-peak', true],
        ['rss-after', true],
      ],
    );
    const bad = evaluateOverloadTargets(
      run({
        open: {
          goodputRatio: 0.5,
          acceptedP99Ratio: 3.5,
          counts: { ok: 1500, shed: 7000, 'shed-429': 0, deadline: 400, timeout: 100, error: 0 },
          rejection: { ...lat(2, 10, 7000), max: OVERLOAD_LIMITS.rejectionMs + 1 },
        },
        rss: { peakMiB: 501, afterMiB: 221 },
      }),
      3,
    );
    assert.ok(
      bad.every((t) => !t.pass),
      JSON.stringify(bad),
    );
    assert.match(bad.find((t) => t.id === 'rejected-as-shed')!.measured, /400 deadline, 100 timeout/);
    assert.match(
      evaluateOverloadTargets({ ...run(), protocol: 'rest' }, 3).find((t) => t.id === 'rejected-as-shed')!
        .target,
      /503/,
    );
  });
});

describe('soak windows and targets', () => {
  const startedAt = 1000;
  // 60 s at 10 req/s; request i scheduled at 100 i ms and answered after 10 ms, or after
  // `slowMs` in the last window; RSS sampled every second, `growMiB` more in the last window.
  const soak = (slowMs: number, growMiB: number, failAt = -1) => {
    const n = 600;
    const scheduledMs = Float64Array.from({ length: n }, (_, i) => i * 100);
    const doneMs = scheduledMs.map((t) => t + (t >= 50_000 ? slowMs : 10));
    const outcome = Uint8Array.from({ length: n }, (_, i) => (i === failAt ? 1 : 0));
    const samples = Array.from({ length: 60 }, (_, s) => ({
      atMs: startedAt + s * 1000 + 500,
      bytes: (200 + (s >= 50 ? growMiB : 0)) * 1024 * 1024,
    }));
    const windows = openLoopWindows({ scheduledMs, doneMs, outcome, startedAt }, samples, 60_000, 6);
    const ok = n - (failAt >= 0 ? 1 : 0);
    return {
      protocol: 'grpc' as const,
      windows,
      open: { sent: n, counts: { ok } } as unknown as NonNullable<OverloadRun['open']>,
    };
  };

  it('cuts the open loop into windows of scheduled time with their p99 and median RSS', () => {
    const { windows } = soak(30, 20, 250);
    assert.equal(windows.length, 6);
    assert.deepEqual(
      windows.map((w) => [w.fromS, w.toS, w.sent, w.ok, w.failed]),
      [
        [0, 10, 100, 100, 0],
        [10, 20, 100, 100, 0],
        [20, 30, 100, 99, 1],
        [30, 40, 100, 100, 0],
        [40, 50, 100, 100, 0],
        [50, 60, 100, 100, 0],
      ],
    );
    assert.equal(windows[0]!.p99, 10);
    assert.equal(windows[5]!.p99, 30);
    assert.equal(windows[0]!.rssMiB, 200);
    assert.equal(windows[5]!.rssMiB, 220);
  });

  it('passes a steady soak and names a failure, RSS growth and p99 drift', () => {
    const steady = evaluateOverloadTargets(soak(11, 9), 0.7);
    assert.deepEqual(
      steady.map((t) => [t.id, t.pass]),
      [
        ['soak-failed', true],
        ['soak-rss-growth', true],
        ['soak-p99-drift', true],
      ],
    );
    const drifting = evaluateOverloadTargets(soak(13, 11, 3), 0.7);
    assert.deepEqual(
      drifting.map((t) => [t.id, t.pass]),
      [
        ['soak-failed', false],
        ['soak-rss-growth', false],
        ['soak-p99-drift', false],
      ],
    );
    assert.match(drifting.find((t) => t.id === 'soak-rss-growth')!.measured, /200 MiB .* 211 MiB/);
  });
});

describe('overload helpers and options', () => {
  it('reads RSS from /proc and samples it', async () => {
    const rss = readRssBytes(process.pid);
    assert.ok(rss !== undefined && rss > 10 * 1024 * 1024, String(rss));
    assert.equal(readRssBytes(2 ** 22 + 12345), undefined);
    const sampler = startRssSampler(process.pid, 10);
    for (let i = 0; i < 500 && sampler.samples.length < 3; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    sampler.stop();
    assert.ok(sampler.samples.length >= 3);
    assert.equal(sampler.since(Infinity).length, 0);
  });

  it('pins with taskset lists', () => {
    assert.deepEqual(pinnedCommand('1'), ['taskset', '--cpu-list', '1']);
    assert.ok(isCpuList('0') && isCpuList('0,1') && isCpuList('0-3,5'));
    assert.ok(!isCpuList('') && !isCpuList('a') && !isCpuList('0;rm'));
  });

  it('plans one step per server start, capacity point, settle, open loop and after', () => {
    const p = planOverload({
      cases: ['mobilenet'],
      protocols: 2,
      capacityConcurrencies: [1, 4],
      capacityDurationMs: 1000,
      settleMs: 1000,
      durationMs: 3000,
      afterMs: 2000,
    });
    assert.equal(p.steps, 2 * overloadRunSteps({ capacityConcurrencies: [1, 4] }));
    assert.equal(overloadRunSteps({ capacityConcurrencies: [1, 4] }), 6);
    assert.ok(p.estimateS > 2 * (3 + 1 + 2 + 2) && p.estimateS < 60, String(p.estimateS));
  });

  it('parses the overload options; --overload-short sets a smoke test that explicit flags override', () => {
    const a = parseBenchArgs([
      '--suite=overload',
      '--overload-protocols=rest',
      '--overload-factor=2.5',
      '--overload-duration-s=10',
      '--capacity-concurrency=8,2,2',
      '--arrivals=fixed',
      '--server-cpus=0',
      '--client-cpus=1',
      '--overload-grpc-connections=8',
    ]);
    assert.deepEqual(a.options.suites, ['overload']);
    assert.deepEqual(a.options.overload, {
      protocols: ['rest'],
      factor: 2.5,
      durationMs: 10_000,
      capacityConcurrencies: [2, 8],
      arrivals: 'fixed',
      serverCpus: '0',
      clientCpus: '1',
      grpcConnections: 8,
    });
    const s = parseBenchArgs(['--suite=overload', '--overload-short', '--overload-after-s=0']);
    assert.equal(s.options.overload?.durationMs, 3000);
    assert.equal(s.options.overload?.afterMs, 0);
    const soak = parseBenchArgs(['--suite=overload', '--overload-soak', '--overload-protocols=rest']);
    assert.deepEqual(soak.options.overload, {
      factor: 0.7,
      durationMs: 1_800_000,
      afterMs: 15_000,
      protocols: ['rest'],
    });
    assert.equal(parseBenchArgs([]).options.overload, undefined);
    for (const args of [
      ['--overload-protocols=smtp'],
      ['--overload-factor=0'],
      ['--capacity-concurrency=0'],
      ['--arrivals=bursty'],
      ['--server-cpus=zero'],
      ['--overload-grpc-connections=0'],
      ['--overload-grpc-connections=1.5'],
      ['--suite=overload', '--grpc=127.0.0.1:8500'],
    ])
      assert.throws(() => parseBenchArgs(args), UsageError, args.join(' '));
  });
});
