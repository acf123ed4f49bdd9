#!/usr/bin/env node
// Idle sockets against the connection guard (docs/overload.md, "Connections"): a `visionserve
// serve` process with default connection settings (or the flags given after --), a good client's
// latency on REST, SageMaker and gRPC before and while N idle sockets per port are open (half
// of them silent, half with a cut request head / HTTP/2 preface), how many of those the server
// closed and when (eviction at --max_connections, the first-bytes deadline), and the server's
// RSS with them open.
//
//   npx tsc -b packages/cli && node bench/idle-connections.mjs [--idle 4200] [--requests 200]
//     [-- --connection_first_bytes_timeout_ms=10000 ...]
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  createInvocationsClient,
  createTfsGrpcClient,
  createTfsRestClient,
  tensor,
} from '@visionserve/client';

const { values: args, positionals } = parseArgs({
  options: { idle: { type: 'string', default: '4200' }, requests: { type: 'string', default: '200' } },
  allowPositionals: true,
});
const IDLE = Number(args.idle);
const REQUESTS = Number(args.requests);
const root = fileURLToPath(new URL('..', import.meta.url));
// The servers run with the malloc settings, as `visionserve serve` runs itself; the server is
// then the process started here, not a launcher's child (packages/cli/src/malloc-tuning.ts).
(await import(join(root, 'packages/cli/dist/src/malloc-tuning.js'))).tuneEnvironment();

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function rssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
}

const { halfPlusTwoModel } = await import(join(root, 'packages/cli/dist/src/tools/demo-models.js'));
const dir = mkdtempSync(join(tmpdir(), 'vs-idle-bench-'));
mkdirSync(join(dir, 'half', '1'), { recursive: true });
writeFileSync(join(dir, 'half', '1', 'model.onnx'), halfPlusTwoModel());
const ports = { grpc: await freePort(), rest: await freePort(), sagemaker: await freePort() };
const server = spawn(
  process.execPath,
  [
    join(root, 'packages/cli/bin/visionserve.js'),
    'serve',
    '--model_name=half',
    `--model_base_path=${join(dir, 'half')}`,
    '--host=127.0.0.1',
    `--port=${ports.grpc}`,
    `--rest_api_port=${ports.rest}`,
    `--sagemaker_port=${ports.sagemaker}`,
    '--log_level=warn',
    ...positionals,
  ],
  { stdio: ['ignore', 'inherit', 'inherit'] },
);
const rest = createTfsRestClient({ baseUrl: `http://127.0.0.1:${ports.rest}` });
for (let i = 0; ; i++) {
  try {
    await rest.predict('half', { x: tensor(Float32Array.from([1])) });
    break;
  } catch (error) {
    if (i > 600) throw error;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const x = tensor(Float32Array.from([1, 2, 3]));
/** p50 and p99 of REQUESTS calls of `call` each on a fresh client (new connection) and on one kept client. */
async function latency(name) {
  const make = {
    rest: () => createTfsRestClient({ baseUrl: `http://127.0.0.1:${ports.rest}` }),
    sagemaker: () => createInvocationsClient({ baseUrl: `http://127.0.0.1:${ports.sagemaker}` }),
    grpc: () => createTfsGrpcClient({ address: `127.0.0.1:${ports.grpc}` }),
  }[name];
  const call = (client) =>
    name === 'sagemaker' ? client.invoke({ instances: [1, 2, 3] }) : client.predict('half', { x });
  const out = {};
  for (const mode of ['new', 'kept']) {
    const times = [];
    let failed = 0;
    const kept = make();
    for (let i = 0; i < REQUESTS; i++) {
      const client = mode === 'kept' ? kept : make();
      const t0 = performance.now();
      try {
        await call(client);
        times.push(performance.now() - t0);
      } catch {
        failed++;
      }
      if (mode === 'new') client.close();
    }
    kept.close();
    times.sort((a, b) => a - b);
    const q = (p) =>
      times.length === 0 ? NaN : times[Math.min(times.length - 1, Math.floor(p * times.length))];
    out[mode] = `p50 ${q(0.5).toFixed(2)} ms, p99 ${q(0.99).toFixed(2)} ms, failed ${failed}`;
  }
  return out;
}

async function report(label) {
  console.log(`${label}: server RSS ${rssMiB(server.pid).toFixed(0)} MiB`);
  for (const name of ['rest', 'sagemaker', 'grpc'])
    console.log(`  ${name}: ${JSON.stringify(await latency(name))}`);
}

await report('no idle sockets');

const cut = {
  rest: Buffer.from('GET /v1/models/half HTTP/1.1\r\nHost: x\r\n'),
  sagemaker: Buffer.from('POST /invocations HTTP/1.1\r\n'),
  grpc: Buffer.from('PRI * HTTP/2.0\r\n'),
};
const idle = [];
const t0 = Date.now();
for (const name of ['rest', 'sagemaker', 'grpc']) {
  for (let i = 0; i < IDLE; i++) {
    const entry = { name, opened: 0, closed: 0 };
    await new Promise((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: ports[name] });
      socket.on('error', () => undefined);
      // Read what the server sends (gRPC's SETTINGS), or its close would go unseen.
      socket.resume();
      socket.once('connect', () => {
        entry.opened = Date.now();
        if (i % 2 === 1) socket.write(cut[name]);
        resolve();
      });
      socket.once('close', () => {
        entry.closed = Date.now();
        resolve();
      });
      entry.socket = socket;
    });
    idle.push(entry);
  }
}
console.log(`opened ${idle.length} idle sockets in ${Date.now() - t0} ms`);
await report(`with ${IDLE} idle sockets per port open`);
const until = Date.now() + 30_000;
while (idle.some((e) => e.closed === 0) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
for (const name of ['rest', 'sagemaker', 'grpc']) {
  const mine = idle.filter((e) => e.name === name);
  const lives = mine.filter((e) => e.closed > 0).map((e) => e.closed - e.opened);
  lives.sort((a, b) => a - b);
  const early = lives.filter((ms) => ms < 9000).length;
  console.log(
    `  ${name}: ${lives.length}/${mine.length} idle sockets closed by the server within 30 s; ` +
      `${early} before 9 s (evicted), the rest after ${lives[early] ?? NaN}-${lives.at(-1) ?? NaN} ms`,
  );
}
for (const e of idle) e.socket.destroy();
rest.close();
server.kill('SIGTERM');
