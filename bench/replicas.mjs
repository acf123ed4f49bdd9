#!/usr/bin/env node
// Replica scaling behind a real load balancer: N visionserve processes on loopback (each a
// "pod" of --instances model instances, pinned to CPUs with taskset), HAProxy in front
// (round robin per request, HTTP/1.1 keep-alive, as an L7 ingress or a Service mesh does),
// wrk as the closed-loop load generator sending KServe v2 binary-tensor requests for
// MobileNetV2. Throughput and latency at 1..N replicas, as ratios to 1 replica measured in
// the same round, and the CPU each part spent per request (server, HAProxy, wrk, and what
// other processes on the machine took meanwhile). Feeds docs/scaling.md.
//
//   bash scripts/bench/install-lb-tools.sh      (HAProxy and wrk from Debian, once)
//   npm run build && node bench/replicas.mjs [--replicas 1,2,3] [--layouts spread,one-core]
//     [--rounds 3] [--duration-s 10] [--concurrency 12] [--instances 1] [--out DIR]
//
// Layouts (cores numbered 0..C-1): spread = HAProxy and wrk on core 0, replica i on core
// i mod C (on 2 cores: replica 1 alone on core 1, replica 2 on core 0 beside the load
// balancer, replica 3 back on core 1); one-core = HAProxy and wrk on core 0, every replica on
// core 1; none = no pinning. Servers run with --max_queue_wait_ms=0 so that overload shows as
// latency, not as shed requests. Results: <out>/replicas.json and replicas.md.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createConnection } from 'node:net';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// The servers run with the malloc settings, as `visionserve serve` runs itself; the server is
// then the process started here, not a launcher's child (packages/cli/src/malloc-tuning.ts).
(await import(join(root, 'packages/cli/dist/src/malloc-tuning.js'))).tuneEnvironment();
const { values: opt } = parseArgs({
  options: {
    replicas: { type: 'string', default: '1,2,3' },
    layouts: { type: 'string', default: 'spread,one-core' },
    rounds: { type: 'string', default: '3' },
    'duration-s': { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '12' },
    instances: { type: 'string', default: '1' },
    shared: { type: 'string', default: join(root, '..', 'shared') },
    out: { type: 'string', default: join(root, 'bench', 'results', 'replicas') },
  },
});
const replicaCounts = opt.replicas.split(',').map(Number);
const layouts = opt.layouts.split(',');
const rounds = Number(opt.rounds);
const durationS = Number(opt['duration-s']);
const concurrency = Number(opt.concurrency);
const instances = Number(opt.instances);
const cores = availableParallelism();
const maxReplicas = Math.max(...replicaCounts);
const cli = join(root, 'packages', 'cli', 'bin', 'visionserve.js');

for (const tool of ['haproxy', 'wrk', 'taskset']) {
  if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
    console.error(`${tool} is missing: bash scripts/bench/install-lb-tools.sh`);
    process.exit(1);
  }
}

const work = await mkdtemp(join(tmpdir(), 'visionserve-replicas-'));
const children = new Set();
const cleanup = async () => {
  for (const c of children) c.kill('SIGKILL');
  await rm(work, { recursive: true, force: true });
};
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    void cleanup().then(() => process.exit(130));
  });
}

// --- the model repository, request body and wrk script
const modelDir = join(work, 'models', 'mobilenet');
await mkdir(join(modelDir, '1'), { recursive: true });
await symlink(join(opt.shared, 'models', 'mobilenetv2-12-int8.onnx'), join(modelDir, '1', 'model.onnx'));
const n = 3 * 224 * 224;
const header = JSON.stringify({
  inputs: [
    { name: 'input', shape: [1, 3, 224, 224], datatype: 'FP32', parameters: { binary_data_size: n * 4 } },
  ],
  outputs: [{ name: 'output', parameters: { binary_data: true } }],
});
const pixels = new Float32Array(n);
for (let i = 0; i < n; i++) pixels[i] = ((i * 7919) % 255) / 255 - 0.5;
const bodyPath = join(work, 'body.bin');
await writeFile(bodyPath, Buffer.concat([Buffer.from(header), Buffer.from(pixels.buffer)]));
const luaPath = join(work, 'infer.lua');
await writeFile(
  luaPath,
  [
    'wrk.method = "POST"',
    `local f = io.open("${bodyPath}", "rb")`,
    'wrk.body = f:read("*a")',
    'f:close()',
    'wrk.headers["Content-Type"] = "application/octet-stream"',
    `wrk.headers["Inference-Header-Content-Length"] = "${Buffer.byteLength(header)}"`,
  ].join('\n'),
);
const inferPath = '/v2/models/mobilenet/infer';

// --- processes
const cpuMs = async (pid) => {
  try {
    const text = await readFile(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  } catch {
    return 0;
  }
};
/** Busy and total jiffies of the whole machine (all cores). */
const machineJiffies = async () => {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = line[3] + line[4];
  const total = line.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
};
const pinned = (cpus, cmd, args) =>
  cpus === undefined ? [cmd, args] : ['taskset', ['-c', cpus, cmd, ...args]];

async function startServer(cpus) {
  const [cmd, args] = pinned(cpus, process.execPath, [
    cli,
    'serve',
    '--model_name=mobilenet',
    `--model_base_path=${modelDir}`,
    '--host=127.0.0.1',
    '--port=0',
    '--rest_api_port=0',
    '--sagemaker_port=-1',
    `--model_instances=${instances}`,
    '--tensorflow_intra_op_parallelism=1',
    '--max_queue_wait_ms=0',
    '--file_system_poll_wait_seconds=0',
  ]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(child);
  let log = '';
  const port = await new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      log += String(d);
      const m = /"msg":"visionserve ready"[^\n]*"rest":(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${log}`)));
  });
  // taskset execs node, so the child's pid is the server's.
  return { child, port, pid: child.pid };
}

async function waitForPort(port) {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise((resolve) => {
      const s = createConnection({ host: '127.0.0.1', port }, () => {
        s.end();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`port ${port} did not open`);
}

let lbPort = 19480;
async function startHaproxy(servers, cpus) {
  lbPort += 1;
  const cfg = join(work, `haproxy-${lbPort}.cfg`);
  await writeFile(
    cfg,
    [
      'global',
      '  nbthread 1',
      '  maxconn 4096',
      'defaults',
      '  mode http',
      '  timeout connect 5s',
      '  timeout client 120s',
      '  timeout server 120s',
      '  option http-keep-alive',
      '  http-reuse always',
      'frontend fe',
      `  bind 127.0.0.1:${lbPort}`,
      '  default_backend be',
      'backend be',
      '  balance roundrobin',
      ...servers.map((s, i) => `  server r${i + 1} 127.0.0.1:${s.port}`),
      '',
    ].join('\n'),
  );
  const [cmd, args] = pinned(cpus, 'haproxy', ['-db', '-f', cfg]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  children.add(child);
  await waitForPort(lbPort);
  return { child, pid: child.pid, port: lbPort };
}

const toMs = (v, unit) => Number(v) * ({ us: 0.001, ms: 1, s: 1000 }[unit] ?? 1);
async function runWrk(port, cpus, seconds) {
  const [cmd, args] = pinned(cpus, '/usr/bin/time', [
    '-f',
    'cpu %U %S',
    'wrk',
    '-t1',
    `-c${concurrency}`,
    `-d${seconds}s`,
    '--timeout',
    '60s',
    '--latency',
    '-s',
    luaPath,
    `http://127.0.0.1:${port}${inferPath}`,
  ]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  child.stdout.on('data', (d) => (out += String(d)));
  child.stderr.on('data', (d) => (out += String(d)));
  await once(child, 'exit');
  children.delete(child);
  const num = (re) => {
    const m = re.exec(out);
    return m ? m : undefined;
  };
  const pct = (p) => {
    const m = num(new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`));
    return m ? toMs(m[1], m[2]) : NaN;
  };
  const rps = num(/Requests\/sec:\s+([\d.]+)/);
  const cpu = num(/cpu ([\d.]+) ([\d.]+)/);
  const non2xx = num(/Non-2xx or 3xx responses: (\d+)/);
  const errors = num(/Socket errors: (.*)/);
  if (!rps) throw new Error(`wrk output not understood:\n${out}`);
  return {
    rps: Number(rps[1]),
    p50: pct(50),
    p90: pct(90),
    p99: pct(99),
    wrkCpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : NaN,
    non2xx: non2xx ? Number(non2xx[1]) : 0,
    socketErrors: errors ? errors[1] : '',
  };
}

/**
 * The raw onnxruntime floor on one core, measured in a child process: the machine's speed at
 * that moment (on a shared box it drifts), to read the server's numbers against.
 */
function measureFloor(cpus) {
  const script = `
    const ort = require('onnxruntime-node');
    (async () => {
      const s = await ort.InferenceSession.create(${JSON.stringify(join(modelDir, '1', 'model.onnx'))},
        { intraOpNumThreads: 1, interOpNumThreads: 1 });
      const x = new ort.Tensor('float32', new Float32Array(${n}).fill(0.25), [1, 3, 224, 224]);
      for (let i = 0; i < 5; i++) await s.run({ input: x });
      const c0 = process.cpuUsage(), t0 = performance.now(); let runs = 0;
      while (performance.now() - t0 < 2000) { await s.run({ input: x }); runs++; }
      const c = process.cpuUsage(c0);
      console.log(JSON.stringify({ wallMs: (performance.now() - t0) / runs, cpuMs: (c.user + c.system) / 1000 / runs }));
    })();`;
  const [cmd, args] = pinned(cpus, process.execPath, ['-e', script]);
  const r = spawnSync(cmd, args, { encoding: 'utf8', cwd: root });
  try {
    return JSON.parse(r.stdout);
  } catch {
    throw new Error(`floor failed: ${r.stderr}`);
  }
}

/** One measured block: wrk through HAProxy to the first `count` servers (or straight to one). */
async function measure(servers, count, layout, direct) {
  const lbCpus = layout === 'none' ? undefined : '0';
  const used = servers.slice(0, count);
  const lb = direct ? undefined : await startHaproxy(used, lbCpus);
  const port = direct ? used[0].port : lb.port;
  await runWrk(port, lbCpus, 1); // connections and the LB's pools warm
  const before = await Promise.all(used.map((s) => cpuMs(s.pid)));
  const lbBefore = lb ? await cpuMs(lb.pid) : 0;
  const m0 = await machineJiffies();
  const load = loadavg()[0];
  const r = await runWrk(port, lbCpus, durationS);
  const m1 = await machineJiffies();
  const after = await Promise.all(used.map((s) => cpuMs(s.pid)));
  const lbCpu = lb ? (await cpuMs(lb.pid)) - lbBefore : 0;
  if (lb) {
    lb.child.kill('SIGTERM');
    await once(lb.child, 'exit');
    children.delete(lb.child);
  }
  const serverCpu = after.reduce((a, v, i) => a + v - before[i], 0);
  const requests = r.rps * durationS;
  // Machine-wide busy cores during the block, and the share not spent by this benchmark.
  const busyCores = ((m1.busy - m0.busy) / (m1.total - m0.total)) * cores;
  const oursCores = (serverCpu + lbCpu + r.wrkCpuMs) / (durationS * 1000);
  return {
    ...r,
    replicas: count,
    direct,
    load1: load,
    serverCpuMsPerReq: serverCpu / requests,
    lbCpuMsPerReq: lbCpu / requests,
    wrkCpuMsPerReq: r.wrkCpuMs / requests,
    busyCores,
    otherCores: Math.max(0, busyCores - oursCores),
  };
}

const results = [];
const floors = [];
try {
  for (const layout of layouts) {
    const cpuOf = (i) =>
      layout === 'none' ? undefined : layout === 'one-core' ? String(cores - 1) : String((i + 1) % cores);
    const servers = [];
    for (let i = 0; i < maxReplicas; i++) servers.push(await startServer(cpuOf(i)));
    for (const s of servers) {
      // warm each replica alone
      const [cmd, args] = pinned(undefined, 'wrk', [
        '-t1',
        '-c2',
        '-d2s',
        '-s',
        luaPath,
        `http://127.0.0.1:${s.port}${inferPath}`,
      ]);
      spawnSync(cmd, args);
    }
    for (let round = 1; round <= rounds; round++) {
      const floor = measureFloor(layout === 'none' ? undefined : String(cores - 1));
      console.error(
        `${layout} round ${round}: raw onnxruntime floor ${floor.wallMs.toFixed(2)} ms wall, ${floor.cpuMs.toFixed(2)} ms CPU per run`,
      );
      floors.push({ layout, round, ...floor });
      const direct = await measure(servers, 1, layout, true);
      results.push({ layout, round, ...direct });
      console.error(fmt(layout, round, direct));
      for (const count of replicaCounts) {
        const r = await measure(servers, count, layout, false);
        results.push({ layout, round, ...r });
        console.error(fmt(layout, round, r));
      }
    }
    for (const s of servers) {
      s.child.kill('SIGTERM');
      await once(s.child, 'exit');
      children.delete(s.child);
    }
  }
} finally {
  await cleanup();
}

function fmt(layout, round, r) {
  return (
    `${layout} round ${round} ${r.direct ? 'direct' : `${r.replicas} replica(s)`}: ${r.rps.toFixed(0)} req/s, ` +
    `p50 ${r.p50.toFixed(1)} p99 ${r.p99.toFixed(1)} ms; CPU ms/req server ${r.serverCpuMsPerReq.toFixed(2)} ` +
    `haproxy ${r.lbCpuMsPerReq.toFixed(2)} wrk ${r.wrkCpuMsPerReq.toFixed(2)}; load ${r.load1.toFixed(1)}, ` +
    `others ${r.otherCores.toFixed(2)} cores${r.non2xx ? `, ${r.non2xx} non-2xx` : ''}${r.socketErrors ? `, socket errors ${r.socketErrors}` : ''}`
  );
}

// --- summary: per layout and replica count, the median over rounds; ratios are paired with
// the same round's 1-replica run through the load balancer.
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const range = (xs) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
const rows = [];
for (const layout of layouts) {
  for (const key of ['direct', ...replicaCounts]) {
    const rs = results.filter(
      (r) => r.layout === layout && (key === 'direct' ? r.direct : !r.direct && r.replicas === key),
    );
    const ratios = rs.map((r) => {
      const base = results.find(
        (b) => b.layout === layout && b.round === r.round && !b.direct && b.replicas === 1,
      );
      return r.rps / base.rps;
    });
    rows.push({
      layout,
      replicas: key,
      rps: median(rs.map((r) => r.rps)),
      rpsRange: `${Math.min(...rs.map((r) => r.rps)).toFixed(0)}–${Math.max(...rs.map((r) => r.rps)).toFixed(0)}`,
      ratio: median(ratios),
      ratioRange: range(ratios),
      p50: median(rs.map((r) => r.p50)),
      p99: median(rs.map((r) => r.p99)),
      serverCpuMsPerReq: median(rs.map((r) => r.serverCpuMsPerReq)),
      lbCpuMsPerReq: median(rs.map((r) => r.lbCpuMsPerReq)),
      wrkCpuMsPerReq: median(rs.map((r) => r.wrkCpuMsPerReq)),
      load1: range(rs.map((r) => r.load1)),
      otherCores: range(rs.map((r) => r.otherCores)),
    });
  }
}
const floorLine = layouts
  .map((l) => {
    const fs = floors.filter((f) => f.layout === l);
    return `${l}: ${fs.map((f) => f.wallMs.toFixed(2)).join(', ')} ms wall (${fs.map((f) => f.cpuMs.toFixed(2)).join(', ')} ms CPU)`;
  })
  .join('; ');
const md = [
  `Raw onnxruntime floor per run, 1 thread, before each round: ${floorLine}.`,
  '',
  `Replica scaling, MobileNetV2 int8, KServe v2 binary tensors over HTTP/1.1, wrk -c${concurrency}, ` +
    `${durationS} s blocks, ${rounds} rounds, ${instances} instance(s) x 1 thread per replica, ${cores} cores; ` +
    "medians over rounds (ranges in brackets); ratio = req/s over the same round's 1 replica behind HAProxy.",
  '',
  '| layout | replicas | req/s | ratio to 1x | p50 ms | p99 ms | server CPU ms/req | HAProxy CPU ms/req | wrk CPU ms/req | load avg (1 min) | other processes (cores busy) |',
  '|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|',
  ...rows.map(
    (r) =>
      `| ${r.layout} | ${r.replicas === 'direct' ? '1, no LB' : r.replicas} | ${r.rps.toFixed(0)} (${r.rpsRange}) | ` +
      `${r.ratio.toFixed(2)} (${r.ratioRange}) | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.serverCpuMsPerReq.toFixed(2)} | ` +
      `${r.lbCpuMsPerReq.toFixed(3)} | ${r.wrkCpuMsPerReq.toFixed(3)} | ${r.load1} | ${r.otherCores} |`,
  ),
  '',
].join('\n');
await mkdir(opt.out, { recursive: true });
await writeFile(
  join(opt.out, 'replicas.json'),
  JSON.stringify({ options: opt, cores, floors, results, rows }, null, 2),
);
await writeFile(join(opt.out, 'replicas.md'), md);
console.log(md);
