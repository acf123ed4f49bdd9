/**
 * Frame streams (WebSocket, `/v2/models/{m}/stream`) against the model's closed-loop capacity,
 * per case with an image, on one server process:
 * 1. capacity: `/invocations` of the case's image from two closed loops (decode and model both
 *    busy, as a stream keeps them) for the duration, and the single-request latency (one loop);
 * 2. sustained frames/s of 1 and of 4 streams with `policy=all`, each keeping two frames
 *    outstanding (a new frame when an answer arrives), and their per-frame latency
 *    (sent to answered, client side);
 * 3. `policy=latest` with frames sent at 2× the capacity: answered, dropped, latency;
 * the server's RSS before and after.
 */
import { type InvocationsClient, createInvocationsClient } from '@visionserve/client';
import { WebSocket } from 'ws';
import type { BenchCase, CaseId } from './bench-cases.js';
import type { BenchProgress } from './bench-progress.js';
import type { ExitCleanup } from './exit-cleanup.js';
import { readRssBytes } from './process-memory.js';
import { startServerProcess } from './server-process.js';
import { type LatencySummary, summarize } from './stats.js';

export interface StreamSuiteOptions {
  readonly cases: readonly BenchCase[];
  /** Each measurement's length, ms. */
  readonly durationMs: number;
  readonly serverFlags: readonly string[];
  readonly cleanup: ExitCleanup;
  readonly progress: BenchProgress;
}

export interface StreamLoad {
  readonly streams: number;
  /** Frames answered with a result, per second. */
  readonly framesPerS: number;
  /** Frames answered with an error (admission sheds frames as it sheds requests). */
  readonly errors: number;
  /** framesPerS / the closed-loop capacity. */
  readonly ofCapacity: number;
  readonly latency: LatencySummary;
}

export interface StreamRow {
  readonly case: CaseId;
  readonly skipped?: string;
  /** /invocations from two closed loops, requests/s. */
  readonly capacityPerS?: number;
  /** One /invocations at a time. */
  readonly invocationsLatency?: LatencySummary;
  readonly loads?: readonly StreamLoad[];
  readonly latest2x?: {
    readonly sentPerS: number;
    readonly sent: number;
    readonly answered: number;
    readonly dropped: number;
    readonly latency: LatencySummary;
  };
  readonly rssBeforeMb?: number | undefined;
  readonly rssAfterMb?: number | undefined;
}

export interface StreamReport {
  readonly durationMs: number;
  readonly rows: readonly StreamRow[];
}

const OUTSTANDING = 2;
const mb = (bytes: number | undefined): number | undefined =>
  bytes === undefined ? undefined : Math.round((bytes / 2 ** 20) * 10) / 10;

export async function runStreamSuite(o: StreamSuiteOptions): Promise<StreamReport> {
  const rows: StreamRow[] = [];
  const server = await startServerProcess(o.serverFlags, { cleanup: o.cleanup });
  const client = createInvocationsClient({
    baseUrl: `http://127.0.0.1:${server.sagemakerPort!}`,
    maxSockets: 2,
  });
  try {
    for (const c of o.cases) {
      if (c.image === undefined) {
        rows.push({ case: c.id, skipped: c.noImageReason ?? 'no image' });
        continue;
      }
      rows.push(await measureCase(o, c, c.image.bytes, client, server));
    }
  } finally {
    client.close();
    await server.stop();
  }
  return { durationMs: o.durationMs, rows };
}

async function measureCase(
  o: StreamSuiteOptions,
  c: BenchCase,
  image: Uint8Array,
  client: InvocationsClient,
  server: { pid: number; restPort: number },
): Promise<StreamRow> {
  const rssBefore = readRssBytes(server.pid);
  const invoke = async (): Promise<void> => {
    (await client.invoke(image, { model: c.model, contentType: 'application/x-image' })).json();
  };
  o.progress.step(`stream · ${c.id} · /invocations capacity`);
  for (let i = 0; i < 5; i++) await invoke();
  const capacityPerS = (await closedLoops(2, o.durationMs, invoke)).count / (o.durationMs / 1000);
  const invocationsLatency = summarize((await closedLoops(1, o.durationMs, invoke)).latencies);
  const url = `ws://127.0.0.1:${server.restPort}/v2/models/${encodeURIComponent(c.model)}/stream`;
  const loads: StreamLoad[] = [];
  for (const streams of [1, 4]) {
    o.progress.step(`stream · ${c.id} · ${streams} stream(s), policy=all`);
    const errors = { count: 0 };
    const results = await Promise.all(
      Array.from({ length: streams }, () =>
        closedLoopStream(`${url}?policy=all`, image, o.durationMs, errors),
      ),
    );
    const frames = results.reduce((n, r) => n + r.length, 0);
    const framesPerS = frames / (o.durationMs / 1000);
    loads.push({
      streams,
      framesPerS,
      ofCapacity: framesPerS / capacityPerS,
      latency: summarize(results.flat()),
      errors: errors.count,
    });
  }
  o.progress.step(`stream · ${c.id} · policy=latest at 2× capacity`);
  const latest2x = await pacedStream(`${url}?policy=latest`, image, 2 * capacityPerS, o.durationMs);
  return {
    case: c.id,
    capacityPerS,
    invocationsLatency,
    loads,
    latest2x,
    ...(rssBefore === undefined
      ? {}
      : { rssBeforeMb: mb(rssBefore), rssAfterMb: mb(readRssBytes(server.pid)) }),
  };
}

/** `loops` closed loops of `call` for `durationMs`: calls completed and their latencies. */
async function closedLoops(
  loops: number,
  durationMs: number,
  call: () => Promise<void>,
): Promise<{ count: number; latencies: number[] }> {
  const latencies: number[] = [];
  const until = performance.now() + durationMs;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        await call();
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { count: latencies.length, latencies };
}

function open(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url);
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      resolve(ws);
    });
    ws.once('error', reject);
  });
}

/**
 * One stream keeping OUTSTANDING frames sent and unanswered for `durationMs`: the latency of
 * each frame answered with a result (frames answered with an error, e.g. shed by admission,
 * are counted in `errors`).
 */
async function closedLoopStream(
  url: string,
  image: Uint8Array,
  durationMs: number,
  errors: { count: number },
): Promise<number[]> {
  const ws = await open(url);
  const sentAt: number[] = [];
  const latencies: number[] = [];
  const until = performance.now() + durationMs;
  await new Promise<void>((resolve) => {
    const send = (): void => {
      sentAt.push(performance.now());
      ws.send(image);
    };
    ws.on('message', (data: Buffer) => {
      const { frame, error } = JSON.parse(data.toString('utf8')) as { frame: number; error?: unknown };
      const now = performance.now();
      if (now < until) {
        if (error === undefined) latencies.push(now - sentAt[frame]!);
        else errors.count++;
        send();
      } else if (frame === sentAt.length - 1) resolve();
    });
    for (let i = 0; i < OUTSTANDING; i++) send();
  });
  ws.close();
  return latencies;
}

/** One `latest` stream sent `perS` frames a second for `durationMs`, then drained. */
async function pacedStream(
  url: string,
  image: Uint8Array,
  perS: number,
  durationMs: number,
): Promise<NonNullable<StreamRow['latest2x']>> {
  const ws = await open(url);
  const sentAt: number[] = [];
  const latencies: number[] = [];
  let dropped = 0;
  let last = -1;
  ws.on('message', (data: Buffer) => {
    const answer = JSON.parse(data.toString('utf8')) as { frame: number; dropped?: number };
    latencies.push(performance.now() - sentAt[answer.frame]!);
    dropped = answer.dropped ?? dropped;
    last = answer.frame;
  });
  const start = performance.now();
  for (let i = 0; performance.now() - start < durationMs; i++) {
    const wait = start + (i * 1000) / perS - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sentAt.push(performance.now());
    ws.send(image);
  }
  while (last < sentAt.length - 1) await new Promise((r) => setTimeout(r, 10));
  ws.close();
  return {
    sentPerS: perS,
    sent: sentAt.length,
    answered: latencies.length,
    dropped,
    latency: summarize(latencies),
  };
}
