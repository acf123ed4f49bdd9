/**
 * The latency suite: for each case, rounds of [floors, every served path in every loop
 * mode, floors again], so that the ratios to the floors hold on a noisy machine. The
 * floors run in worker threads of this process; served paths through `LatencyEndpoints`.
 */
import { byteSize } from '@visionserve/protocol';
import type { OrtSessionSettings } from '@visionserve/server';
import { type BenchCase, type StagedRepository } from './bench-cases.js';
import { type PathId, isFloorPath } from './bench-paths.js';
import type { BenchProgress } from './bench-progress.js';
import type { BenchRow, CaseReport, FloorReference } from './bench-results.js';
import { aggregateSamples, floorReference } from './aggregate-samples.js';
import { type FloorRunner, createFloorRunner } from './floor-runner.js';
import { type LatencyEndpoints, runnerFor } from './latency-endpoints.js';
import { type FloorImageWork, createOrtFloor } from './ort-floor.js';
import type { LoopMode, PathRunner, Sample, Unavailable } from './path-runner.js';
import { measureRssPerMessage } from './server-rss-per-message.js';

export interface LatencySuiteOptions {
  readonly cases: readonly BenchCase[];
  /** Paths in table order (floors included). */
  readonly paths: readonly PathId[];
  readonly modes: readonly LoopMode[];
  /** Requests in flight in the closed loop. */
  readonly concurrency: number;
  /** Open-loop arrival rate (req/s); when undefined, rateFraction × the path's closed-loop throughput. */
  readonly ratePerSecond: number | undefined;
  readonly rateFraction: number;
  /** Per block: run for durationMs, at least minRequests, at most maxRequests. */
  readonly durationMs: number;
  readonly minRequests: number;
  readonly maxRequests: number;
  /** Untimed requests before each path's first block (and before every floor block). */
  readonly warmup: number;
  /** Served paths: keep warming up until this much time has passed, in ms (after `warmup` requests). Default 0. */
  readonly warmupMs?: number;
  /** Rounds over all paths; the samples of all rounds are pooled. */
  readonly repeat: number;
  readonly repo: StagedRepository;
  /** The served model's session settings (the floors use the same). */
  readonly floorSettings: OrtSessionSettings;
  readonly endpoints: LatencyEndpoints;
  readonly progress: BenchProgress;
  /**
   * Cases whose server RSS per message in flight is measured before their rounds (gRPC
   * tensor_content path, concurrency 1 and 2; server-rss-per-message.ts). Default: raw_detector.
   */
  readonly rssPerMessageCases?: readonly string[];
}

export interface LatencySuiteResult {
  readonly cases: readonly CaseReport[];
  readonly rows: readonly BenchRow[];
}

/** What the image floor runs for a case with an image and a classification visionserve.json. */
export function imageWorkFor(c: BenchCase): FloorImageWork | Unavailable {
  const image = c.image;
  if (image === undefined) return { unavailable: c.noImageReason ?? 'no image input' };
  const post = image.vision.postprocess;
  if (post?.kind !== 'classification') return { unavailable: 'the image floor covers classification only' };
  const inputs = Object.keys(c.inputs);
  const outputs = Object.keys(c.outputs);
  const input = image.vision.image?.input ?? (inputs.length === 1 ? inputs[0] : undefined);
  const output = post.output ?? (outputs.length === 1 ? outputs[0] : undefined);
  if (input === undefined || output === undefined)
    return { unavailable: 'visionserve.json must name the image input and the scores output' };
  return {
    bytes: image.bytes,
    image: image.vision.image ?? {},
    input,
    postprocess: post,
    output,
    labelsText: image.labelsText,
  };
}

function tensorsBytes(c: BenchCase): number {
  let n = 0;
  for (const t of Object.values(c.inputs)) n += byteSize(t);
  return n;
}

const isUnavailable = (r: object): r is Unavailable => 'unavailable' in r;

/** Opens the floors a case needs (closed by the returned function). */
async function openFloors(
  c: BenchCase,
  o: LatencySuiteOptions,
): Promise<{ runners: Map<PathId, FloorRunner | Unavailable>; close: () => Promise<void> }> {
  const runners = new Map<PathId, FloorRunner | Unavailable>();
  const closers: (() => Promise<void>)[] = [];
  const modelPath = o.repo.modelPath(c.id);
  try {
    if (o.paths.includes('floor')) {
      const floor = await createOrtFloor(modelPath, c.inputs, o.floorSettings);
      closers.push(() => floor.close());
      runners.set('floor', createFloorRunner(floor, tensorsBytes(c)));
    }
    if (o.paths.includes('image-floor')) {
      const work = imageWorkFor(c);
      if (isUnavailable(work)) runners.set('image-floor', work);
      else {
        const floor = await createOrtFloor(modelPath, {}, o.floorSettings, work);
        closers.push(() => floor.close());
        runners.set('image-floor', createFloorRunner(floor, work.bytes.byteLength));
      }
    }
  } catch (error) {
    for (const close of closers) await close();
    throw error;
  }
  return {
    runners,
    close: async () => {
      for (const close of closers) await close();
    },
  };
}

export async function runLatencySuite(o: LatencySuiteOptions): Promise<LatencySuiteResult> {
  const rows: BenchRow[] = [];
  const cases: CaseReport[] = [];
  for (const c of o.cases) {
    const result = await runCase(c, o);
    cases.push(result.report);
    rows.push(...result.rows);
  }
  return { cases, rows };
}

const key = (p: PathId, m: LoopMode): string => `${p}|${m}`;

/** One case's run: what its blocks measured and why some were skipped. */
interface CaseRun {
  readonly c: BenchCase;
  readonly o: LatencySuiteOptions;
  readonly samples: Map<string, Sample[]>;
  readonly skipped: Map<string, string>;
  readonly limits: { durationMs: number; minRequests: number; maxRequests: number };
  readonly floors: Awaited<ReturnType<typeof openFloors>>;
  readonly runners: Map<PathId, PathRunner | Unavailable>;
  /** Served paths whose warmup requests were sent (once per path). */
  readonly warmed: Set<PathId>;
}

function record(run: CaseRun, k: string, sample: Sample): void {
  run.samples.set(k, [...(run.samples.get(k) ?? []), sample]);
  if (sample.latenciesMs.length === 0)
    run.skipped.set(k, `every request failed: ${sample.firstError ?? 'unknown error'}`);
}

function fail(run: CaseRun, k: string, error: unknown): void {
  run.skipped.set(k, `failed: ${error instanceof Error ? error.message : String(error)}`);
}

async function runFloors(run: CaseRun, round: number, which: 'before' | 'after'): Promise<void> {
  const { c, o } = run;
  for (const p of o.paths.filter(isFloorPath)) {
    o.progress.step(`${c.id} · ${p} (${which}) · round ${round + 1}`);
    const runner = run.floors.runners.get(p)!;
    const k = key(p, 'closed');
    if (isUnavailable(runner)) {
      run.skipped.set(k, runner.unavailable);
      continue;
    }
    try {
      record(
        run,
        k,
        await runner.runBlock({
          mode: 'closed',
          concurrency: 1,
          ratePerSecond: 0,
          warmup: o.warmup,
          ...run.limits,
        }),
      );
    } catch (error) {
      fail(run, k, error);
    }
  }
}

/** Before the rounds: the server has not yet served these answers (see server-rss-per-message.ts). */
async function rssPerMessageOf(run: CaseRun): Promise<CaseReport['serverRssPerMessage']> {
  const { c, o } = run;
  const tc = run.runners.get('grpc-tensor-content');
  const tcPid = o.endpoints.grpcTensorContent?.pid;
  if (!(o.rssPerMessageCases ?? ['raw_detector']).includes(c.id) || tc === undefined) return undefined;
  o.progress.step(`${c.id} · server RSS per message in flight`);
  if (isUnavailable(tc) || tcPid === undefined) {
    return { unavailable: 'needs the gRPC tensor_content server started here' };
  }
  return measureRssPerMessage({ runner: tc, pid: tcPid }).catch((error: unknown) => ({
    unavailable: `failed: ${error instanceof Error ? error.message : String(error)}`,
  }));
}

/** The open-loop rate of a path: --rate, or a fraction of its last closed-loop throughput. */
function openRate(run: CaseRun, p: PathId): number | undefined {
  const { o } = run;
  const lastClosed = run.samples.get(key(p, 'closed'))?.at(-1);
  return (
    o.ratePerSecond ??
    (lastClosed !== undefined && lastClosed.wallMs > 0
      ? ((lastClosed.latenciesMs.length * 1000) / lastClosed.wallMs) * o.rateFraction
      : undefined)
  );
}

/** One block of a served path in one loop mode. */
async function runServedBlock(run: CaseRun, round: number, p: PathId, mode: LoopMode): Promise<void> {
  const { c, o } = run;
  const runner = run.runners.get(p)!;
  const k = key(p, mode);
  if (isUnavailable(runner)) {
    o.progress.step(`${c.id} · ${p} · skipped`);
    run.skipped.set(k, runner.unavailable);
    return;
  }
  if (run.skipped.has(k)) {
    o.progress.step(`${c.id} · ${p} · ${mode} · skipped`);
    return;
  }
  const rate = openRate(run, p);
  const label = `${c.id} · ${p} · ${mode === 'closed' ? `closed c=${o.concurrency}` : `open ${rate?.toFixed(1) ?? '?'}/s`} · round ${round + 1}`;
  o.progress.step(label);
  if (mode === 'open' && (rate === undefined || !(rate > 0))) {
    run.skipped.set(k, 'open loop needs --rate or a closed-loop block of the same path to derive it from');
    return;
  }
  try {
    const warmup = run.warmed.has(p) ? 0 : o.warmup;
    run.warmed.add(p);
    record(
      run,
      k,
      await runner.runBlock({
        mode,
        concurrency: o.concurrency,
        ratePerSecond: rate ?? 0,
        warmup,
        warmupMs: o.warmupMs ?? 0,
        ...run.limits,
        onProgress: (n) => {
          o.progress.tick(`${label} · ${n} req`);
        },
      }),
    );
  } catch (error) {
    fail(run, k, error);
  }
}

/** The report rows of every path and mode of the case. */
function caseRows(
  run: CaseRun,
  floorRef: FloorReference | undefined,
  imageRef: FloorReference | undefined,
): BenchRow[] {
  const { c, o } = run;
  const rows: BenchRow[] = [];
  for (const p of o.paths) {
    const floor = isFloorPath(p);
    for (const mode of floor ? (['closed'] as const) : o.modes) {
      const k = key(p, mode);
      const list = run.samples.get(k) ?? [];
      const base = {
        case: c.id,
        path: p,
        mode,
        concurrency: mode === 'closed' ? (floor ? 1 : o.concurrency) : undefined,
        ratePerSecond: list[0]?.ratePerSecond,
      };
      const usable = list.filter((s) => s.latenciesMs.length > 0);
      if (usable.length === 0) {
        rows.push({ ...base, skipped: run.skipped.get(k) ?? 'not measured' });
        continue;
      }
      if (floor) {
        // A floor's p50/p99 are its reference (medians over its blocks); ratios compare with the ORT floor.
        const ref = floorReference(usable);
        const row = aggregateSamples(base, usable, undefined);
        rows.push({
          ...row,
          latency: { ...row.latency!, p50: ref.p50, p99: ref.p99 },
          roundP50s: ref.p50s,
          ...(floorRef ? { ratioP50: ref.p50 / floorRef.p50, ratioP99: ref.p99 / floorRef.p99 } : {}),
        });
        continue;
      }
      const imagePath = p === 'invocations' || p === 'rest-b64' || p === 'rest-b64-cached';
      rows.push(aggregateSamples(base, usable, floorRef, imagePath ? imageRef : undefined));
    }
  }
  return rows;
}

async function runCase(
  c: BenchCase,
  o: LatencySuiteOptions,
): Promise<{ report: CaseReport; rows: BenchRow[] }> {
  const servedPaths = o.paths.filter((p) => !isFloorPath(p));
  const floors = await openFloors(c, o);
  const run: CaseRun = {
    c,
    o,
    samples: new Map(),
    skipped: new Map(),
    limits: { durationMs: o.durationMs, minRequests: o.minRequests, maxRequests: o.maxRequests },
    floors,
    runners: new Map(),
    warmed: new Set(),
  };
  let rssPerMessage: CaseReport['serverRssPerMessage'];
  try {
    for (const p of servedPaths) run.runners.set(p, runnerFor(p, c, o.endpoints));
    rssPerMessage = await rssPerMessageOf(run);
    for (let round = 0; round < o.repeat; round++) {
      await runFloors(run, round, 'before');
      for (const p of servedPaths) for (const mode of o.modes) await runServedBlock(run, round, p, mode);
      await runFloors(run, round, 'after');
    }
  } finally {
    await floors.close();
  }
  const measured = (p: PathId): Sample[] =>
    (run.samples.get(key(p, 'closed')) ?? []).filter((s) => s.latenciesMs.length > 0);
  const floorRef = measured('floor').length > 0 ? floorReference(measured('floor')) : undefined;
  const imageRef = measured('image-floor').length > 0 ? floorReference(measured('image-floor')) : undefined;
  const imageRunner = floors.runners.get('image-floor');
  const report: CaseReport = {
    id: c.id,
    title: c.title,
    request: c.requestNote,
    floorP50s: floorRef?.p50s ?? [],
    floorP50: floorRef?.p50 ?? NaN,
    floorP99: floorRef?.p99 ?? NaN,
    ...(imageRef && imageRunner && !isUnavailable(imageRunner)
      ? { imageFloor: { ...imageRef, answer: imageRunner.lastAnswer() } }
      : {}),
    ...(rssPerMessage !== undefined ? { serverRssPerMessage: rssPerMessage } : {}),
  };
  return { report, rows: caseRows(run, floorRef, imageRef) };
}
