// Preloaded into a visionserve server built with marks.patch (node --import): collects the
// timestamps the patch's marks record for each gRPC request and, when the process exits,
// prints on stderr the median and p90 of every step of a c=1 request (see README.md here).
// Only meaningful at concurrency 1: each mark belongs to the request opened last.
import { writeSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

const STEPS = [
  ['h', 'h1', 'HPACK decode of the request headers'],
  ['h1', 'h2', 'stream checks and creation'],
  ['h2', 'h3', 'gRPC call setup up to the observer'],
  ['h3', 'h5', 'observer, close handler'],
  ['h5', 'h6', 'method lookup, deadline and body timers'],
  ['h6', 'h9', 'readMessage set up'],
  ['h9', 'q0', 'first DATA bytes up to the placement'],
  ['q0', 'qa', 'admission on the message head'],
  ['qa', 'q1', 'alignment probe, message buffer'],
  ['h', 'e', 'request headers to the end of the message (reads)'],
  ['e', 'p', 'decode, core, validation, up to postMessage'],
  ['p', 'P', 'postMessage to the worker'],
  ['P', 'w0', 'worker wakes and gets the run'],
  ['w0', 'w1', 'worker builds the ort tensors'],
  ['w1', 'w2', 'session.run'],
  ['w2', 'w3', 'worker takes the outputs'],
  ['w3', 'm', 'main thread wakes and gets the result'],
  ['m', 'r', 'result to the encoded answer'],
  ['r', 'w', 'answer written (one socket write)'],
  ['h', 'w', 'server: request headers to answer written'],
];

if (isMainThread) {
  const requests = [];
  let current;
  let readStart = 0;
  let readBytes = 0;
  const now = () => performance.timeOrigin + performance.now();
  globalThis.__vsMark = (name, opens, bytes, worker) => {
    const t = now();
    if (name === 'd') {
      readStart = t;
      readBytes = bytes;
      if (current !== undefined && current.e === undefined) (current.reads ??= []).push(bytes);
      return;
    }
    if (name === 'D') {
      if (current !== undefined && (current.e === undefined || current.e >= readStart)) {
        (current.busy ??= []).push(t - readStart);
      }
      return;
    }
    if (opens) {
      // The read that brought the headers began before the request opened.
      current = { h: t, reads: [readBytes] };
      requests.push(current);
      return;
    }
    if (current === undefined) return;
    current[name] ??= t;
    if (worker !== undefined) [current.w0, current.w1, current.w2, current.w3] = worker;
  };
  process.on('exit', () => {
    // The first half is the warm-up block.
    const done = requests
      .slice(Math.floor(requests.length / 2))
      .filter((r) => r.w !== undefined && r.w0 !== undefined);
    if (done.length === 0) return;
    const pick = (xs, q) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * q)];
    const us = (ms) => `${Math.round(ms * 1000)}`.padStart(6);
    let out = `c1-phases: ${done.length} requests; µs p50 / p90\n`;
    for (const [a, b, what] of STEPS) {
      const xs = done.map((r) => r[b] - r[a]).filter((x) => !Number.isNaN(x));
      if (xs.length > 0) out += `${us(pick(xs, 0.5))} ${us(pick(xs, 0.9))}  ${a}->${b}  ${what}\n`;
    }
    const gaps = done.slice(1).map((r, i) => r.h - done[i].w);
    out += `${us(pick(gaps, 0.5))} ${us(pick(gaps, 0.9))}  w->h  answer written to the next request's headers (client, kernel)\n`;
    const busy = done.map((r) => (r.busy ?? []).reduce((a, b) => a + b, 0));
    out += `${us(pick(busy, 0.5))} ${us(pick(busy, 0.9))}  in our socket-read handlers between h and e\n`;
    // The handlers of the reads that brought the request (its first one also opens the call).
    const reads = done[0].reads ?? [];
    for (let i = 0; i < reads.length; i++) {
      const xs = done.filter((r) => (r.busy?.length ?? 0) > i).map((r) => r.busy[i]);
      if (xs.length < done.length / 2) break;
      out += `${us(pick(xs, 0.5))} ${us(pick(xs, 0.9))}  read ${i} handler (${reads[i]} B)\n`;
    }
    writeSync(2, out);
  });
}
