#!/usr/bin/env node
// The gRPC server's HTTP/2 transports A/B (`grpcTransport` 'node' vs 'lean') without a model:
// a server process with one unary method that answers every request with a fixed response
// (no inference), and a client that sends the same request bytes in a closed loop. Server
// CPU per request (utime+stime of the server process from /proc) is the transport's cost:
// HTTP/2, framing, the gRPC server's call handling and the event loop.
//
//   npx tsc -b packages/cli && node bench/grpc-transport.mjs [--client node|python] [--rounds 3]
//     [--requests 2000] [--concurrency 1] [--request-bytes 602112] [--response-bytes 4000]
//     [--transports node,lean] [--python PATH]
//
// Rounds alternate the transports (node, lean, node, lean, ...), each with a fresh server
// process, so both see the same machine load. The python client is grpcio (C-core) with
// raw bytes (no protobuf), as bench/peers' loadgen; --python names its interpreter (default
// bench/peers/.venv-client/bin/python, else python3 with grpcio installed).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    serve: { type: 'string' },
    client: { type: 'string', default: 'node' },
    rounds: { type: 'string', default: '3' },
    requests: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '1' },
    'request-bytes': { type: 'string', default: '602112' },
    'response-bytes': { type: 'string', default: '4000' },
    transports: { type: 'string', default: 'node,lean' },
    python: { type: 'string' },
    'client-max-frame': { type: 'string' },
  },
});
const responseBytes = Number(args['response-bytes']);

function cpuTicks(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function startServer(transport) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [fileURLToPath(import.meta.url), '--serve', transport, '--response-bytes', String(responseBytes)],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    child.once('error', reject);
    child.stdout.once('data', (d) => resolve({ child, port: Number(String(d).trim()) }));
  });
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function nodeClient(port, requests, concurrency, requestBytes) {
  const { createGrpcChannel } = await import('@visionserve/client');
  const channel = createGrpcChannel({
    address: `127.0.0.1:${port}`,
    ...(args['client-max-frame'] ? { maxFrameBytes: Number(args['client-max-frame']) } : {}),
  });
  const request = Buffer.alloc(requestBytes, 3);
  const latencies = [];
  let next = 0;
  const warm = Math.min(50, requests);
  for (let i = 0; i < warm; i++) await channel.unary('/bench.Echo/Call', [request]);
  const t0 = performance.now();
  const worker = async () => {
    while (next++ < requests) {
      const start = performance.now();
      const answer = await channel.unary('/bench.Echo/Call', [request]);
      latencies.push(performance.now() - start);
      if (answer.byteLength !== responseBytes) throw new Error(`answer of ${answer.byteLength} bytes`);
    }
  };
  const cpu0 = process.cpuUsage();
  return {
    latencies,
    warm,
    run: () =>
      Promise.all(Array.from({ length: concurrency }, worker)).then(() => ({
        wallMs: performance.now() - t0,
        clientCpuMs: (process.cpuUsage(cpu0).user + process.cpuUsage(cpu0).system) / 1000,
      })),
    close: () => channel.close?.(),
  };
}

const PYTHON_CLIENT = `
import grpc, sys, time, threading, json
port, requests, concurrency, req_bytes, resp_bytes = map(int, sys.argv[1:6])
ch = grpc.insecure_channel(f'127.0.0.1:{port}', options=[('grpc.max_receive_message_length', -1), ('grpc.max_send_message_length', -1)])
call = ch.unary_unary('/bench.Echo/Call')
req = b'\\x03' * req_bytes
for _ in range(min(50, requests)):
    call(req)
sys.stdout.write('warm\\n'); sys.stdout.flush()
sys.stdin.readline()
lat = []
lock = threading.Lock()
left = [requests]
def work():
    while True:
        with lock:
            if left[0] <= 0: return
            left[0] -= 1
        t = time.perf_counter()
        r = call(req)
        d = (time.perf_counter() - t) * 1000
        assert len(r) == resp_bytes
        with lock: lat.append(d)
t0 = time.perf_counter(); c0 = time.process_time()
ts = [threading.Thread(target=work) for _ in range(concurrency)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({'latencies': lat, 'wallMs': (time.perf_counter() - t0) * 1000, 'clientCpuMs': (time.process_time() - c0) * 1000}))
`;

function pythonPath() {
  if (args.python) return args.python;
  for (const p of [
    'bench/peers/.venv-client/bin/python',
    '../main/bench/peers/.venv-client/bin/python',
    '/work/main/bench/peers/.venv-client/bin/python',
  ]) {
    if (existsSync(p)) return p;
  }
  return 'python3';
}

async function main() {
  const rounds = Number(args.rounds);
  const requests = Number(args.requests);
  const concurrency = Number(args.concurrency);
  const requestBytes = Number(args['request-bytes']);
  const transports = args.transports.split(',');
  const results = Object.fromEntries(transports.map((t) => [t, []]));
  for (let round = 0; round < rounds; round++) {
    for (const transport of transports) {
      const { child, port } = await startServer(transport);
      let measured;
      if (args.client === 'python') {
        const py = spawn(
          pythonPath(),
          [
            '-c',
            PYTHON_CLIENT,
            String(port),
            String(requests),
            String(concurrency),
            String(requestBytes),
            String(responseBytes),
          ],
          { stdio: ['pipe', 'pipe', 'inherit'] },
        );
        let out = '';
        py.stdout.on('data', (d) => (out += d));
        await new Promise((resolve, reject) => {
          const check = () => (out.includes('warm\n') ? resolve() : py.stdout.once('data', check));
          py.once('close', (code) => {
            child.kill('SIGKILL');
            reject(new Error(`python client exited with ${code}`));
          });
          check();
        });
        const cpu0 = cpuTicks(child.pid);
        py.stdin.write('go\n');
        const code = await new Promise((resolve) => py.once('close', resolve));
        if (code !== 0) {
          child.kill('SIGKILL');
          throw new Error(`python client exited with ${code}: ${out}`);
        }
        const cpu1 = cpuTicks(child.pid);
        const r = JSON.parse(out.slice(out.indexOf('warm\n') + 5));
        measured = { ...r, serverCpuMs: (cpu1 - cpu0) * 10 };
      } else {
        const c = await nodeClient(port, requests, concurrency, requestBytes);
        const cpu0 = cpuTicks(child.pid);
        const r = await c.run();
        const cpu1 = cpuTicks(child.pid);
        measured = { latencies: c.latencies, ...r, serverCpuMs: (cpu1 - cpu0) * 10 };
        c.close();
      }
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('close', resolve));
      const sorted = measured.latencies.sort((a, b) => a - b);
      const row = {
        serverCpuMsPerReq: measured.serverCpuMs / requests,
        clientCpuMsPerReq: measured.clientCpuMs / requests,
        p50: percentile(sorted, 50),
        p99: percentile(sorted, 99),
        reqPerS: (requests / measured.wallMs) * 1000,
      };
      results[transport].push(row);
      process.stderr.write(
        `round ${round + 1} ${transport}: server CPU ${row.serverCpuMsPerReq.toFixed(3)} ms/req, client CPU ${row.clientCpuMsPerReq.toFixed(3)}, p50 ${row.p50.toFixed(2)} ms, p99 ${row.p99.toFixed(2)}, ${row.reqPerS.toFixed(0)} req/s\n`,
      );
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `client ${args.client}, c=${concurrency}, ${requests} requests of ${requestBytes} B, responses of ${responseBytes} B, ${rounds} rounds`,
  );
  for (const t of transports) {
    const rs = results[t];
    console.log(
      `${t.padEnd(5)} server CPU ms/req median ${median(rs.map((r) => r.serverCpuMsPerReq)).toFixed(3)} [${rs.map((r) => r.serverCpuMsPerReq.toFixed(3)).join(' ')}]` +
        `  p50 ms median ${median(rs.map((r) => r.p50)).toFixed(2)} [${rs.map((r) => r.p50.toFixed(2)).join(' ')}]` +
        `  p99 [${rs.map((r) => r.p99.toFixed(2)).join(' ')}]  client CPU ${median(rs.map((r) => r.clientCpuMsPerReq)).toFixed(3)}  req/s ${median(rs.map((r) => r.reqPerS)).toFixed(0)}`,
    );
  }
}

if (args.serve !== undefined) {
  // Server child: prints its port, serves until killed.
  const { startGrpcServer } = await import('../packages/server/dist/src/frontends/grpc/index.js');
  const { createJsonLogger } = await import('../packages/server/dist/src/util/logger.js');
  const { DEFAULTS } = await import('../packages/server/dist/src/config/server-config.js');
  const { grpcServerSettings } = await import('../packages/server/dist/src/compose/config-settings.js');
  const response = Buffer.alloc(responseBytes, 7);
  const server = await startGrpcServer({
    ...grpcServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    logger: createJsonLogger({ level: 'warn', write: (line) => process.stderr.write(`${line}\n`) }),
    transport: args.serve,
    services: [{ name: 'bench.Echo', methods: { Call: { handler: () => Promise.resolve([response]) } } }],
  });
  process.stdout.write(`${server.port}\n`);
  process.on('SIGTERM', () => {
    void server.close(100).then(() => process.exit(0));
  });
} else {
  await main();
}
