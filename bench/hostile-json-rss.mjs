#!/usr/bin/env node
// Server memory under a hostile JSON campaign (issue 31 item 6: "RSS after a fuzz campaign is
// within 100 MiB of before"). Starts a `visionserve serve` process with MobileNetV2 (from
// ../shared) and half_plus_two, warms it up with valid requests, then sends generated bodies
// for --seconds with --concurrency in flight to TF Serving REST (:predict, :classify), KServe v2
// JSON and /invocations: mutations of valid small and 1.6 MiB bodies, deep nesting, 100,000-key
// objects, long strings and numbers, cut bodies. Prints the server's RSS before the campaign
// (after the warm-up), its peak, and --after seconds after the last answer, with the answers
// per status. Exit code 1 when RSS after is more than --limit MiB over before, or the server
// answered 5xx other than 503/504 or died.
//
//   npx tsc -b packages/cli && node bench/hostile-json-rss.mjs [--seconds 120] [--concurrency 8]
//     [--after 15] [--limit 100] [--shared ../shared]
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import fc from 'fast-check';

const root = fileURLToPath(new URL('..', import.meta.url));
// The servers run with the malloc settings, as `visionserve serve` runs itself; the server is
// then the process started here, not a launcher's child (packages/cli/src/malloc-tuning.ts).
(await import(join(root, 'packages/cli/dist/src/malloc-tuning.js'))).tuneEnvironment();
const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '120' },
    concurrency: { type: 'string', default: '8' },
    after: { type: 'string', default: '15' },
    limit: { type: 'string', default: '100' },
    shared: { type: 'string', default: join(root, '..', 'shared') },
    only: { type: 'string' },
  },
});
const { mutate, mutationArb, hostileStringArb } = await import(
  join(root, 'packages/testkit/dist/src/arbitraries.js')
);
const { halfPlusTwoModel } = await import(join(root, 'packages/cli/dist/src/tools/demo-models.js'));

async function freePort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const dir = mkdtempSync(join(tmpdir(), 'vs-hostile-json-'));
mkdirSync(join(dir, 'half', '1'), { recursive: true });
writeFileSync(join(dir, 'half', '1', 'model.onnx'), halfPlusTwoModel());
mkdirSync(join(dir, 'mobilenet', '1'), { recursive: true });
copyFileSync(
  join(args.shared, 'models', 'mobilenetv2-12-int8.onnx'),
  join(dir, 'mobilenet', '1', 'model.onnx'),
);
writeFileSync(
  join(dir, 'models.config'),
  `model_config_list {
  config { name: 'half' base_path: '${join(dir, 'half')}' model_platform: 'onnx' }
  config { name: 'mobilenet' base_path: '${join(dir, 'mobilenet')}' model_platform: 'onnx' }
}\n`,
);
writeFileSync(join(dir, 'monitoring.config'), 'prometheus_config { enable: true path: "/metrics" }\n');
const ports = { grpc: await freePort(), rest: await freePort(), sagemaker: await freePort() };
const server = spawn(
  process.execPath,
  [
    join(root, 'packages/cli/bin/visionserve.js'),
    'serve',
    `--model_config_file=${join(dir, 'models.config')}`,
    '--host=127.0.0.1',
    `--port=${ports.grpc}`,
    `--rest_api_port=${ports.rest}`,
    `--sagemaker_port=${ports.sagemaker}`,
    '--log_level=error',
    `--monitoring_config_file=${join(dir, 'monitoring.config')}`,
  ],
  { stdio: ['ignore', 'ignore', 'inherit'] },
);
// However this script ends (a throw included), the server and its folder go with it.
process.on('exit', () => {
  if (server.exitCode === null) server.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});
const base = `http://127.0.0.1:${ports.rest}`;
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`${base}/v1/models/mobilenet`)).ok) break;
  } catch {}
  if (i > 600) throw new Error('server did not start');
  await sleep(100);
}

// Bodies: valid small and large, and what the campaign makes of them.
const image = Array.from({ length: 3 }, () =>
  Array.from({ length: 224 }, () => Array.from({ length: 224 }, () => Math.round(Math.random() * 1e4) / 1e4)),
);
const bigPredict = JSON.stringify({ instances: [image] });
const small = ['{"instances":[1,2,3]}', '{"inputs":{"x":[[1.5,2]]}}', '{"instances":[{"x":[1,2]}]}'];
const kserveBody = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [3], data: [1, 2, 3] }] });
const deep = (n) => '['.repeat(n) + ']'.repeat(n);
const manyKeys = (n) => `{"instances":[{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}}]}`;
const text = (s) => Buffer.from(s, 'utf8');
const kinds = [
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.constantFrom(...small, kserveBody), fc.array(mutationArb, { maxLength: 4 }))
      .map(([b, m]) => mutate(text(b), m)),
  },
  { weight: 2, arbitrary: fc.array(mutationArb, { maxLength: 3 }).map((m) => mutate(text(bigPredict), m)) },
  { weight: 1, arbitrary: fc.constant(text(bigPredict)) },
  { weight: 1, arbitrary: fc.integer({ min: 10, max: 200_000 }).map((n) => text(deep(n))) },
  { weight: 1, arbitrary: fc.integer({ min: 100, max: 100_000 }).map((n) => text(manyKeys(n))) },
  { weight: 1, arbitrary: hostileStringArb.map((s) => text(JSON.stringify({ instances: [s] }))) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 2_000_000 }).map((n) => text(`{"instances":[${'9'.repeat(n)}]}`)),
  },
  { weight: 1, arbitrary: fc.nat({ max: bigPredict.length }).map((n) => text(bigPredict.slice(0, n))) },
];
// --only K: the K-th kind alone (0-based, in the order above), to find what memory goes to.
const bodyArb = args.only === undefined ? fc.oneof(...kinds) : kinds[Number(args.only)].arbitrary;
const routes = [
  '/v1/models/mobilenet:predict',
  '/v1/models/half:predict',
  '/v1/models/half:classify',
  '/v2/models/half/infer',
  '/v2/models/mobilenet/infer',
];

// Warm-up: valid requests on every path, so "before" is a warm server.
for (let i = 0; i < 40; i++) {
  await (
    await fetch(`${base}/v1/models/mobilenet:predict`, { method: 'POST', body: bigPredict })
  ).arrayBuffer();
  await (await fetch(`${base}/v1/models/half:predict`, { method: 'POST', body: small[0] })).arrayBuffer();
}
await sleep(3000);
const before = rssMiB(server.pid);
const residentBefore = residentByKind(server.pid);
// Series in the metrics: a campaign must not create new ones (a label from hostile input).
const seriesCount = async () => {
  const lines = (await (await fetch(`${base}/metrics`)).text())
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'));
  return lines.length;
};
const seriesBefore = await seriesCount();
const statuses = {};
let peak = before;
let sent = 0;
const sampler = setInterval(() => {
  peak = Math.max(peak, rssMiB(server.pid));
}, 200);
const until = Date.now() + Number(args.seconds) * 1000;
const gen = fc.sample(bodyArb, { numRuns: 4000, seed: 31 });
async function loop(k) {
  for (let i = k; Date.now() < until; i += Number(args.concurrency)) {
    const body = gen[i % gen.length];
    const route = routes[i % routes.length];
    const sagemaker = i % 7 === 0;
    const url = sagemaker ? `http://127.0.0.1:${ports.sagemaker}/invocations` : `${base}${route}`;
    const headers = sagemaker
      ? { 'content-type': 'application/json', 'x-amzn-sagemaker-target-model': 'mobilenet' }
      : {};
    let status;
    try {
      const r = await fetch(url, { method: 'POST', body, headers });
      await r.arrayBuffer();
      status = String(r.status);
    } catch (error) {
      status = `transport: ${error.cause?.code ?? error.message}`;
    }
    statuses[status] = (statuses[status] ?? 0) + 1;
    sent++;
  }
}
await Promise.all(Array.from({ length: Number(args.concurrency) }, (_, k) => loop(k)));
clearInterval(sampler);
const afterMs = Number(args.after) * 1000;
await sleep(afterMs);
const alive = server.exitCode === null;
const after = alive ? rssMiB(server.pid) : NaN;
// Where the resident memory is: the main malloc heap, V8 heap pages (256 KiB mappings), file
// mappings, and other anonymous memory: glibc's thread arenas (a 64 MiB region whose used part is
// a separate, smaller read-write mapping, so they cannot be told by size), onnxruntime's and
// node's own mappings.
function residentByKind(pid) {
  const kinds = {};
  let kind = 'other';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head) {
      const size = (parseInt(head[2], 16) - parseInt(head[1], 16)) / 1024;
      const name = head[4];
      kind =
        name === '[heap]'
          ? 'malloc main heap'
          : name.startsWith('/')
            ? 'files'
            : name !== ''
              ? name
              : size % 256 === 0 && size <= 1024
                ? 'v8 pages (256 KiB)'
                : 'other anonymous (thread arenas among it)';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kinds[kind] = (kinds[kind] ?? 0) + Number(rss[1]);
  }
  return Object.fromEntries(
    Object.entries(kinds)
      .filter(([, kb]) => kb >= 1024)
      .map(([k, kb]) => [k, Math.round(kb / 1024)]),
  );
}
const residentAfter = alive ? residentByKind(server.pid) : {};
// The main thread's V8 heap and what it holds outside it, from the server's own metrics.
const heap = {};
const series = { before: seriesBefore, after: alive ? await seriesCount() : NaN };
if (alive) {
  const metrics = await (await fetch(`${base}/metrics`)).text();
  for (const name of [
    'nodejs_heap_size_total_bytes',
    'nodejs_heap_size_used_bytes',
    'nodejs_external_memory_bytes',
  ]) {
    const m = new RegExp(`^visionserve_${name} (\\S+)`, 'm').exec(metrics);
    if (m) heap[name.replace('_bytes', 'MiB')] = Math.round(Number(m[1]) / 1048576);
  }
}
server.kill('SIGTERM');
const bad = Object.keys(statuses).filter((s) => /^5/.test(s) && s !== '503' && s !== '504');
console.log(
  JSON.stringify(
    {
      seconds: Number(args.seconds),
      concurrency: Number(args.concurrency),
      sent,
      statuses,
      rssMiB: {
        before: Math.round(before),
        peak: Math.round(peak),
        after: Math.round(after),
        afterS: Number(args.after),
      },
      growthMiB: Math.round(after - before),
      mainHeapAfter: heap,
      metricSeries: series,
      residentMiB: { before: residentBefore, after: residentAfter },
      alive,
    },
    null,
    1,
  ),
);
process.exitCode = !alive || bad.length > 0 || !(after - before <= Number(args.limit)) ? 1 : 0;
