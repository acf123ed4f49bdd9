/** The benchmark's suites: what each measures and which cases it runs by default. */
import type { CaseId } from './bench-cases.js';

export type SuiteId = 'latency' | 'sweep' | 'cold-start' | 'overload' | 'stream';
export const SUITE_IDS: readonly SuiteId[] = ['latency', 'sweep', 'cold-start', 'overload', 'stream'];

export interface SuiteInfo {
  readonly id: SuiteId;
  readonly description: string;
  /** Cases when --cases is not given. */
  readonly defaultCases: readonly CaseId[];
}

export const SUITES: Readonly<Record<SuiteId, SuiteInfo>> = {
  latency: {
    id: 'latency',
    description: 'every serving path vs the raw onnxruntime and image floors (closed and open loop)',
    defaultCases: ['mobilenet', 'raw_detector'],
  },
  sweep: {
    id: 'sweep',
    description: 'gRPC throughput per server layout (instances × threads, batching) and concurrency',
    defaultCases: ['mobilenet', 'yolox'],
  },
  'cold-start': {
    id: 'cold-start',
    description: 'server start to ready and the first requests, with and without model warmup',
    defaultCases: ['mobilenet', 'yolox'],
  },
  overload: {
    id: 'overload',
    description:
      'capacity per protocol (gRPC, REST), then an open loop at 3× capacity: goodput, shedding, latency, RSS',
    defaultCases: ['mobilenet'],
  },
  stream: {
    id: 'stream',
    description:
      'WebSocket frame streams: frames/s of 1 and 4 streams vs /invocations capacity, per-frame latency, drops at 2× with latest, RSS',
    defaultCases: ['mobilenet'],
  },
};

/** Parses `--suite`: a comma-separated list of suite ids or `all`; undefined when a name is unknown. */
export function parseSuites(text: string): SuiteId[] | undefined {
  const names = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (names.length === 0) return undefined;
  const out: SuiteId[] = [];
  for (const n of names) {
    if (n === 'all') out.push(...SUITE_IDS);
    else if ((SUITE_IDS as readonly string[]).includes(n)) out.push(n as SuiteId);
    else return undefined;
  }
  return SUITE_IDS.filter((s) => out.includes(s));
}
