import uPlot from 'uplot';
import { API } from './api.js';
import { formatMs, h, table } from './dom.js';

interface Quantiles {
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
}
interface Series {
  readonly model: string;
  readonly api: string;
  readonly rps: number;
  readonly errorRps: number;
  readonly latency: Quantiles;
  readonly phases: Readonly<Record<'decode' | 'queue' | 'inference' | 'encode', Quantiles>>;
}
interface Sample {
  readonly t: number;
  readonly intervalS: number;
  readonly series: readonly Series[];
  readonly models: readonly { model: string; queueDepth: number; batchSizeMean: number | null }[];
  readonly shedPerS: number;
  readonly workerRestarts: number;
}

const WINDOW = 120;
const COLORS = ['#0b5cad', '#c0392b', '#1e8449', '#8e44ad', '#d35400', '#117a65', '#7f8c8d', '#2c3e50'];

/** A rolling chart: x = time, one line per key. */
class Rolling {
  private readonly xs: number[] = [];
  private readonly lines = new Map<string, (number | null)[]>();
  private plot: uPlot | undefined;
  constructor(
    private readonly host: HTMLElement,
    private readonly unit: string,
  ) {}
  push(t: number, values: ReadonlyMap<string, number | null>): void {
    this.xs.push(t / 1000);
    for (const key of values.keys()) {
      if (!this.lines.has(key))
        this.lines.set(
          key,
          this.xs.slice(0, -1).map(() => null),
        );
    }
    for (const [key, line] of this.lines) line.push(values.get(key) ?? null);
    if (this.xs.length > WINDOW) {
      this.xs.shift();
      for (const line of this.lines.values()) line.shift();
    }
    this.draw();
  }
  private draw(): void {
    const keys = [...this.lines.keys()];
    const data = [this.xs, ...keys.map((k) => this.lines.get(k)!)] as uPlot.AlignedData;
    if (this.plot === undefined || this.plot.series.length !== keys.length + 1) {
      this.plot?.destroy();
      this.plot = new uPlot(
        {
          width: Math.max(320, Math.min(560, this.host.clientWidth || 520)),
          height: 200,
          series: [
            {},
            ...keys.map((k, i) => ({
              label: k,
              stroke: COLORS[i % COLORS.length],
              width: 2,
              spanGaps: false,
            })),
          ],
          axes: [{}, { label: this.unit, size: 60 }],
          legend: { live: false },
        },
        data,
        this.host,
      );
    } else {
      this.plot.setData(data);
    }
    this.host.dataset['points'] = String(this.xs.length);
  }
}

let source: EventSource | undefined;

/** Stops the stream (the server stops sampling once no client is connected). */
export function stopTraffic(): void {
  source?.close();
  source = undefined;
}

export function renderTraffic(view: HTMLElement): void {
  stopTraffic();
  const chart = (id: string, title: string): HTMLElement => {
    const host = h('div', { class: 'chart-plot', id, 'data-testid': id });
    return h('figure', { class: 'chart' }, h('h3', {}, title), host);
  };
  const status = h('p', { role: 'status', 'data-testid': 'traffic-status' }, 'Connecting…');
  const latest = h('div', { 'data-testid': 'traffic-latest' });
  view.replaceChildren(
    h('h2', {}, 'Traffic'),
    status,
    h(
      'div',
      { class: 'charts' },
      chart('chart-rate', 'Requests per second (model · API)'),
      chart('chart-latency', 'Latency p50 / p99 (ms)'),
      chart('chart-phases', 'Predict phases p50: decode / queue / inference / encode (ms)'),
      chart('chart-queue', 'Queue depth, mean batch size, shed/s, worker restarts'),
    ),
    h('h3', {}, 'Last second'),
    latest,
  );
  const rate = new Rolling(view.querySelector('#chart-rate')!, 'req/s');
  const latency = new Rolling(view.querySelector('#chart-latency')!, 'ms');
  const phases = new Rolling(view.querySelector('#chart-phases')!, 'ms');
  const queue = new Rolling(view.querySelector('#chart-queue')!, '');
  let samples = 0;
  source = new EventSource(`${API}/traffic`);
  source.addEventListener('unavailable', (event) => {
    const data = JSON.parse((event as MessageEvent<string>).data) as { reason: string };
    status.textContent = `Traffic is not available: ${data.reason}`;
    stopTraffic();
  });
  source.addEventListener('sample', (event) => {
    const s = JSON.parse((event as MessageEvent<string>).data) as Sample;
    samples++;
    status.textContent = `Live: ${samples} samples`;
    status.dataset['samples'] = String(samples);
    const key = (x: Series): string => `${x.model} · ${x.api}`;
    rate.push(s.t, new Map(s.series.map((x) => [key(x), x.rps])));
    latency.push(
      s.t,
      new Map(
        s.series.flatMap((x) => [
          [`${key(x)} p50`, x.latency.p50Ms] as const,
          [`${key(x)} p99`, x.latency.p99Ms] as const,
        ]),
      ),
    );
    const phase = (name: 'decode' | 'queue' | 'inference' | 'encode'): number | null => {
      const values = s.series.map((x) => x.phases[name].p50Ms).filter((v): v is number => v !== null);
      return values.length === 0 ? null : Math.max(...values);
    };
    phases.push(
      s.t,
      new Map([
        ['decode', phase('decode')],
        ['queue', phase('queue')],
        ['inference', phase('inference')],
        ['encode', phase('encode')],
      ]),
    );
    queue.push(
      s.t,
      new Map<string, number | null>([
        ...s.models.map((m) => [`${m.model} queue`, m.queueDepth] as const),
        ...s.models.map((m) => [`${m.model} batch`, m.batchSizeMean] as const),
        ['shed/s', s.shedPerS],
        ['worker restarts', s.workerRestarts],
      ]),
    );
    latest.replaceChildren(
      table(
        ['model', 'API', 'req/s', 'errors/s', 'p50', 'p99', 'queue p50', 'inference p50', 'encode p50'],
        s.series.map((x) => [
          x.model,
          x.api,
          x.rps.toFixed(1),
          x.errorRps.toFixed(1),
          formatMs(x.latency.p50Ms),
          formatMs(x.latency.p99Ms),
          formatMs(x.phases.queue.p50Ms),
          formatMs(x.phases.inference.p50Ms),
          formatMs(x.phases.encode.p50Ms),
        ]),
        'traffic-table',
      ),
    );
  });
  source.onerror = () => {
    status.textContent = 'Disconnected; retrying…';
  };
}
