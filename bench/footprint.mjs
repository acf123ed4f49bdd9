#!/usr/bin/env node
// Per-pod footprint for resource requests: one visionserve process serving MobileNetV2 and
// the TF-OD detector (the Deployment's model set) with N instances each, idle and then
// saturated by wrk (KServe v2 binary tensors, closed loop) on each model in turn. Reports the
// resident set after start, the peak resident set (VmHWM), and the cores the process used
// while saturated. Feeds docs/scaling.md and the requests in deploy/.
//
//   npm run build && node bench/footprint.mjs [--instances 1,2] [--duration-s 10] [--concurrency 8]
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// The servers run with the malloc settings, as `visionserve serve` runs itself; the server is
// then the process started here, not a launcher's child (packages/cli/src/malloc-tuning.ts).
(await import(join(root, 'packages/cli/dist/src/malloc-tuning.js'))).tuneEnvironment();
const { values: opt } = parseArgs({
  options: {
    instances: { type: 'string', default: '1,2' },
    'duration-s': { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '8' },
    shared: { type: 'string', default: join(root, '..', 'shared') },
  },
});
const durationS = Number(opt['duration-s']);
const cli = join(root, 'packages', 'cli', 'bin', 'visionserve.js');
const work = await mkdtemp(join(tmpdir(), 'visionserve-footprint-'));
const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

// models as the Deployment's volume holds them
const models = {
  mobilenet: { file: 'mobilenetv2-12-int8.onnx', input: 'input', shape: [1, 3, 224, 224], datatype: 'FP32' },
  detector: {
    file: 'yolox_nano_tfod.onnx',
    input: 'input_tensor',
    shape: [1, 480, 640, 3],
    datatype: 'UINT8',
  },
};
const lines = ['model_config_list {'];
for (const [name, m] of Object.entries(models)) {
  await mkdir(join(work, name, '1'), { recursive: true });
  await copyFile(join(opt.shared, 'models', m.file), join(work, name, '1', 'model.onnx'));
  lines.push(`  config { name: '${name}' base_path: '${join(work, name)}' }`);
  const n = m.shape.reduce((a, b) => a * b, 1);
  const bytes = m.datatype === 'FP32' ? 4 : 1;
  const header = JSON.stringify({
    inputs: [
      { name: m.input, shape: m.shape, datatype: m.datatype, parameters: { binary_data_size: n * bytes } },
    ],
  });
  const data = Buffer.alloc(n * bytes);
  for (let i = 0; i < n; i++) {
    if (bytes === 4) data.writeFloatLE(((i * 7919) % 255) / 255 - 0.5, i * 4);
    else data[i] = (i * 7919) % 255;
  }
  await writeFile(join(work, `${name}.bin`), Buffer.concat([Buffer.from(header), data]));
  await writeFile(
    join(work, `${name}.lua`),
    [
      'wrk.method = "POST"',
      `local f = io.open("${join(work, `${name}.bin`)}", "rb")`,
      'wrk.body = f:read("*a")',
      'f:close()',
      'wrk.headers["Content-Type"] = "application/octet-stream"',
      `wrk.headers["Inference-Header-Content-Length"] = "${Buffer.byteLength(header)}"`,
    ].join('\n'),
  );
}
lines.push('}');
await writeFile(join(work, 'models.config'), lines.join('\n'));

const status = async (pid) => {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(text)?.[1] ?? NaN);
  return { rssMiB: kb('VmRSS') / 1024, hwmMiB: kb('VmHWM') / 1024 };
};
const cpuMs = async (pid) => {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};

const rows = [];
for (const instances of opt.instances.split(',').map(Number)) {
  const child = spawn(
    process.execPath,
    [
      cli,
      'serve',
      `--model_config_file=${join(work, 'models.config')}`,
      '--host=127.0.0.1',
      '--port=0',
      '--rest_api_port=0',
      '--sagemaker_port=-1',
      `--model_instances=${instances}`,
      '--tensorflow_intra_op_parallelism=1',
      '--max_queue_wait_ms=0',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
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
  const idle = await status(child.pid);
  const row = { instances, idleRssMiB: idle.rssMiB, load1: loadavg()[0] };
  for (const name of Object.keys(models)) {
    const url = `http://127.0.0.1:${port}/v2/models/${name}/infer`;
    const lua = join(work, `${name}.lua`);
    spawnSync('wrk', ['-t1', '-c2', '-d2s', '-s', lua, url]);
    const c0 = await cpuMs(child.pid);
    const t0 = Date.now();
    const r = spawnSync(
      'wrk',
      ['-t1', `-c${opt.concurrency}`, `-d${durationS}s`, '--latency', '-s', lua, url],
      {
        encoding: 'utf8',
      },
    );
    const cores = (await cpuMs(child.pid)) - c0;
    row[`${name}Rps`] = Number(/Requests\/sec:\s+([\d.]+)/.exec(r.stdout)?.[1]);
    row[`${name}Cores`] = cores / (Date.now() - t0);
    row[`${name}Non2xx`] = Number(/Non-2xx or 3xx responses: (\d+)/.exec(r.stdout)?.[1] ?? 0);
  }
  const after = await status(child.pid);
  row.peakRssMiB = after.hwmMiB;
  row.afterRssMiB = after.rssMiB;
  child.kill('SIGTERM');
  await once(child, 'exit');
  children.delete(child);
  rows.push(row);
  console.error(JSON.stringify(row));
}
await rm(work, { recursive: true, force: true });
console.log(
  [
    `Footprint: MobileNetV2 int8 + YOLOX-Nano TF-OD in one process, wrk -c${opt.concurrency}, ${durationS} s per model`,
    '',
    '| instances per model | RSS after start MiB | peak RSS MiB | MobileNetV2 req/s | cores used | detector req/s | cores used | load avg |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.instances} | ${r.idleRssMiB.toFixed(0)} | ${r.peakRssMiB.toFixed(0)} | ${r.mobilenetRps.toFixed(0)} | ` +
        `${r.mobilenetCores.toFixed(2)} | ${r.detectorRps.toFixed(0)} | ${r.detectorCores.toFixed(2)} | ${r.load1.toFixed(1)} |`,
    ),
  ].join('\n'),
);
