// Bare node:http2 pair: many concurrent large requests with large responses on one connection.
// Usage: node h2-stall-bare.mjs [concurrency=64] [reqMiB=2] [respMiB=1.2] [serverConnWindowKiB] [clientConnWindowKiB] [streamWindowKiB]
import http2 from 'node:http2';
import { execSync } from 'node:child_process';

const conc = Number(process.argv[2] ?? 64);
const reqBytes = Math.round(Number(process.argv[3] ?? 2) * 1024 * 1024);
const respBytes = Math.round(Number(process.argv[4] ?? 1.2) * 1024 * 1024);
const serverConn = Number(process.argv[5] ?? 64 * 1024) * 1024;
const clientConn = Number(process.argv[6] ?? 64 * 1024) * 1024;
const streamWin = Number(process.argv[7] ?? 16 * 1024) * 1024;
const rounds = Number(process.env.ROUNDS ?? 3);

const server = http2.createServer({
  settings: { initialWindowSize: Math.min(streamWin, serverConn) },
  maxSessionMemory: 4096,
});
server.on('session', (s) => s.on('connect', () => s.setLocalWindowSize(serverConn)));
const response = Buffer.alloc(respBytes, 7);
server.on('stream', (stream) => {
  let n = 0;
  stream.on('data', (c) => (n += c.length));
  stream.on('end', () => {
    stream.respond({ ':status': 200 });
    stream.end(response);
  });
  stream.on('error', () => {});
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
const client = http2.connect(`http://127.0.0.1:${port}`, {
  maxSessionMemory: 1024,
  settings: { initialWindowSize: streamWin },
});
client.on('connect', () => client.setLocalWindowSize(clientConn));
client.on('error', () => {});
const body = Buffer.alloc(reqBytes, 3);
const one = () =>
  new Promise((resolve, reject) => {
    const st = client.request({ ':method': 'POST', ':path': '/' });
    let got = 0;
    st.on('data', (c) => (got += c.length));
    st.on('end', () => (got === respBytes ? resolve() : reject(new Error('short'))));
    st.on('error', reject);
    st.end(body);
  });
const t0 = performance.now();
const durationMs = Number(process.env.DURATION_MS ?? 8000);
let done = 0;
let lastProgress = performance.now();
let stalled = false;
const worker = async () => {
  while (!stalled && performance.now() - t0 < durationMs) {
    await one();
    done++;
    lastProgress = performance.now();
  }
};
const workers = Promise.all(Array.from({ length: conc }, worker));
const out = await new Promise((resolve) => {
  workers.then(
    () => resolve('ok'),
    (e) => resolve('error ' + e.message),
  );
  const iv = setInterval(() => {
    if (performance.now() - lastProgress > 5000) {
      clearInterval(iv);
      resolve('stalled');
    }
  }, 250);
  workers.finally(() => clearInterval(iv));
});
if (out === 'stalled') {
  stalled = true;
  try {
    console.log(execSync(`ss -tnmi '( sport = :${port} or dport = :${port} )'`).toString());
  } catch {}
}
console.log(
  JSON.stringify({
    out,
    done,
    conc,
    reqBytes,
    respBytes,
    serverConn,
    clientConn,
    streamWin,
    ms: Math.round(performance.now() - t0),
  }),
);
process.exit(stalled ? 2 : 0);
