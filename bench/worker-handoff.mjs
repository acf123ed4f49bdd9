#!/usr/bin/env node
// The main thread <-> inference worker hand-off without a model: one worker thread answers
// every request at once, and the main thread sends the next request when the answer arrives
// (closed loop, one in flight). What a round trip costs is what the server pays per request
// on top of session.run for crossing threads.
//
//   node bench/worker-handoff.mjs [--rounds 2] [--requests 3000] [--modes post,atomics]
//
// Modes:
//   post     what the server does (runtime/onnx-session-factory.ts, onnx-worker.ts): postMessage
//            of a `run` message moving a 602,112 B input buffer, answered by a `result`
//            message moving a 4,000 B output buffer.
//   atomics  the lower bound of a SharedArrayBuffer hand-off: a counter per direction, bumped
//            and Atomics.notify'd, awaited with Atomics.waitAsync; no payload at all.
// Rounds alternate the modes, each in a fresh worker. Reported per round trip: wall time
// (mean, p50, p99) and CPU (the whole process, and the main thread alone from /proc).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const INPUT_BYTES = 602_112;
const OUTPUT_BYTES = 4_000;

if (!isMainThread) {
  const { mode, bell } = workerData;
  const counters = new Int32Array(bell);
  // An unsettled Atomics.waitAsync does not keep a thread's event loop alive.
  setInterval(() => undefined, 60_000);
  if (mode === 'post') {
    parentPort.on('message', (message) => {
      const buffer = new ArrayBuffer(OUTPUT_BYTES);
      const output = { name: 'output', dtype: 'float32', shape: [1, 1000], buffer, byteOffset: 0 };
      parentPort.postMessage(
        { type: 'result', id: message.id, outputs: [{ ...output, byteLength: OUTPUT_BYTES }], computeMs: 1 },
        [buffer],
      );
    });
  } else {
    let seen = 0;
    const serve = async () => {
      for (;;) {
        const wait = Atomics.waitAsync(counters, 0, seen);
        if (wait.async) await wait.value;
        seen = Atomics.load(counters, 0);
        Atomics.add(counters, 1, 1);
        Atomics.notify(counters, 1);
      }
    };
    void serve();
  }
  parentPort.postMessage('ready');
} else {
  const { values: args } = parseArgs({
    options: {
      rounds: { type: 'string', default: '2' },
      requests: { type: 'string', default: '3000' },
      modes: { type: 'string', default: 'post,atomics' },
    },
  });
  const requests = Number(args.requests);
  const threadTicks = () => {
    const stat = readFileSync(`/proc/${process.pid}/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  const TICK_US = 10_000; // USER_HZ = 100 on Linux

  const round = async (mode) => {
    const bell = new SharedArrayBuffer(8);
    const counters = new Int32Array(bell);
    const worker = new Worker(new URL(import.meta.url), { workerData: { mode, bell } });
    await new Promise((resolve) => worker.once('message', resolve));
    const keepAlive = setInterval(() => undefined, 60_000);
    let answered = 0;
    let id = 0;
    const roundTrip =
      mode === 'post'
        ? () =>
            new Promise((resolve) => {
              const buffer = Buffer.allocUnsafeSlow(INPUT_BYTES).buffer;
              const input = {
                name: 'input',
                dtype: 'float32',
                shape: [1, 3, 224, 224],
                buffer,
                byteOffset: 0,
              };
              worker.once('message', resolve);
              worker.postMessage(
                { type: 'run', id: ++id, inputs: [{ ...input, byteLength: INPUT_BYTES }], lend: true },
                [buffer],
              );
            })
        : async () => {
            Atomics.add(counters, 0, 1);
            Atomics.notify(counters, 0);
            const wait = Atomics.waitAsync(counters, 1, answered);
            if (wait.async) await wait.value;
            answered = Atomics.load(counters, 1);
          };
    for (let i = 0; i < 300; i++) await roundTrip();
    const latencies = [];
    const cpu0 = process.cpuUsage();
    const main0 = threadTicks();
    const start = performance.now();
    for (let i = 0; i < requests; i++) {
      const t = performance.now();
      await roundTrip();
      latencies.push(performance.now() - t);
    }
    const elapsed = performance.now() - start;
    const cpu = process.cpuUsage(cpu0);
    const mainUs = ((threadTicks() - main0) * TICK_US) / requests;
    clearInterval(keepAlive);
    await worker.terminate();
    latencies.sort((a, b) => a - b);
    const us = (ms) => Math.round(ms * 1000);
    return {
      mode,
      requests,
      mean_us: us(elapsed / requests),
      p50_us: us(latencies[Math.floor(requests / 2)]),
      p99_us: us(latencies[Math.floor(requests * 0.99)]),
      process_cpu_us: Math.round((cpu.user + cpu.system) / requests),
      main_thread_cpu_us: Math.round(mainUs),
    };
  };

  const modes = args.modes.split(',');
  for (let r = 0; r < Number(args.rounds); r++) {
    for (const mode of modes) console.log(JSON.stringify(await round(mode)));
  }
}
