#!/usr/bin/env node
// The client-side cost of an HTTP/1.1 exchange, three clients alternated in one run: our own
// transport (@visionserve/client's http1-transport), undici's request() (the maintained client
// behind node's fetch) and node:http with a keep-alive agent. A child process serves fixed
// answers on loopback (no model), so what differs is the client alone: its CPU per request
// (process.cpuUsage of this process) and the latency, for a small answer (4 KiB, like a
// classifier's) and a large one (34 MiB, like a raw detector's outputs), each to a 588 KiB request
// (MobileNetV2's float input). Usage: npm run build && node bench/http1-client.mjs [--rounds 3]
// Numbers: docs/adr/0002-own-http1-client.md.
import { fork } from 'node:child_process';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1] || 3);
const SIZES = { small: 4 * 1024, large: 34 * 1024 * 1024 };
const REQUEST = Buffer.alloc(588 * 1024, 7);

if (process.argv.includes('--serve')) serve();
else await main();

function serve() {
  const answers = Object.fromEntries(Object.entries(SIZES).map(([k, n]) => [k, Buffer.alloc(n, 1)]));
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = answers[req.url.slice(1)];
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => process.send(server.address().port));
}

async function clients(base) {
  const { createHttp1Transport } = await import(join(root, 'packages/client/dist/src/http1-transport.js'));
  let undici;
  try {
    undici = await import('undici');
  } catch {
    console.error('undici is not installed (npm ci installs it as a devDependency)');
    process.exit(1);
  }
  const ours = createHttp1Transport(new URL(base), { baseUrl: base, maxSockets: 1 });
  const pool = new undici.Pool(base, { connections: 1 });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  return {
    ours: async (path) =>
      (await ours.request({ method: 'POST', path, body: REQUEST, signal: new AbortController().signal })).body
        .length,
    undici: async (path) => {
      const res = await pool.request({ method: 'POST', path, body: REQUEST });
      return Buffer.from(await res.body.arrayBuffer()).length;
    },
    'node:http': (path) =>
      new Promise((resolve, reject) => {
        const req = http.request(`${base}${path}`, { method: 'POST', agent }, (res) => {
          const parts = [];
          res.on('data', (c) => parts.push(c));
          res.on('end', () => resolve(Buffer.concat(parts).length));
        });
        req.on('error', reject);
        req.end(REQUEST);
      }),
  };
}

async function block(call, path, count) {
  const times = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    await call(path);
    times.push(performance.now() - t);
  }
  const cpu = process.cpuUsage(cpu0);
  times.sort((a, b) => a - b);
  const pick = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  return { p50: pick(0.5), p99: pick(0.99), cpuMs: (cpu.user + cpu.system) / 1000 / count };
}

async function main() {
  const child = fork(fileURLToPath(import.meta.url), ['--serve']);
  const port = await new Promise((resolve) => child.once('message', resolve));
  const all = await clients(`http://127.0.0.1:${port}`);
  const delay = monitorEventLoopDelay();
  delay.enable();
  const results = {};
  for (let r = 0; r < rounds; r++) {
    for (const [size, count] of [
      ['small', 200],
      ['large', 15],
    ]) {
      for (const [name, call] of Object.entries(all)) {
        await block(call, `/${size}`, Math.ceil(count / 10)); // warm-up
        const row = await block(call, `/${size}`, count);
        (results[`${size} ${name}`] ??= []).push(row);
      }
    }
  }
  console.log('| answer | client | p50 ms | p99 ms | client CPU ms/req |\n|---|---|---:|---:|---:|');
  for (const [key, rows] of Object.entries(results)) {
    const [size, name] = key.split(' ');
    const range = (f) => {
      const v = rows.map(f).sort((a, b) => a - b);
      return v.length === 1 ? v[0].toFixed(2) : `${v[0].toFixed(2)}–${v.at(-1).toFixed(2)}`;
    };
    console.log(
      `| ${size} | ${name} | ${range((x) => x.p50)} | ${range((x) => x.p99)} | ${range((x) => x.cpuMs)} |`,
    );
  }
  child.kill();
  process.exit(0);
}
