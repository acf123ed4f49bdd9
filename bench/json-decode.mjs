#!/usr/bin/env node
// JSON tensor bodies: our full decode (bytes -> typed arrays, on one thread, as a decode thread
// or the event loop runs it) against JSON.parse of the same body, in one process, per body kind:
//   tfs-row        {"instances": [[[[...]]]]}               TF Serving REST row format
//   tfs-columnar   {"inputs": {"input": [[[[...]]]]}}       TF Serving REST columnar format
//   kserve-flat    {"inputs": [{..., "data": [...]}]}       KServe v2 as tritonclient.http sends it
//   kserve-nested  {"inputs": [{..., "data": [[[[...]]]]}]} KServe v2 with nested data
//   sagemaker-list [[[[...]]]]                              SageMaker /invocations, a bare JSON list
// The tensor is 1x224x224x3 float32 (150,528 values) written as Python writes a float32 widened
// to float64 (repr, up to 17 significant digits: tritonclient's and numpy tolist()'s numbers),
// or with --digits short as 6-digit decimals.
//
//   npx tsc -b packages/cli && node bench/json-decode.mjs [--rounds 10] [--digits long|short] [--kinds a,b] [--json out.json]
//
// Reports the median CPU ms (process.cpuUsage) per body of: JSON.parse(text), Buffer.toString + JSON.parse, our decode
// (the same functions the server calls, from the bytes), and ours / JSON.parse(text).
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import {
  parseTfsPredictBody,
  parseTfsPredictJson,
  readFastJsonBody,
  tfsJsonToTensors,
} from '@visionserve/protocol';
import { decodeHttpInferRequest } from '@visionserve/protocol/kserve';
// The server's SageMaker JSON handler (not a package export): what /invocations falls back to.
import { jsonToPredictBody } from '../packages/server/dist/src/frontends/sagemaker/content-types.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    digits: { type: 'string', default: 'long' },
    json: { type: 'string' },
    kinds: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const SHAPE = [1, 224, 224, 3];
const COUNT = SHAPE.reduce((a, b) => a * b, 1);

// mulberry32: the same tensor on every run.
let seed = 42;
const random = () => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const values = Float32Array.from({ length: COUNT }, () => random() * 4 - 2);
const texts = Array.from(values, (v) => (args.digits === 'short' ? v.toFixed(6) : String(v)));

/** The flat numbers nested to `shape` as JSON text. */
function nested(shape, from = 0) {
  if (shape.length === 1) return `[${texts.slice(from, from + shape[0]).join(', ')}]`;
  const stride = shape.slice(1).reduce((a, b) => a * b, 1);
  const parts = [];
  for (let i = 0; i < shape[0]; i++) parts.push(nested(shape.slice(1), from + i * stride));
  return `[${parts.join(', ')}]`;
}
const flat = `[${texts.join(', ')}]`;
const tensor = nested(SHAPE);
const kserve = (data) =>
  `{"inputs": [{"name": "input", "shape": [${SHAPE.join(', ')}], "datatype": "FP32", "data": ${data}}], ` +
  `"outputs": [{"name": "probabilities", "parameters": {"binary_data": false}}]}`;

const SPECS = { input: { dtype: 'float32' } };
const tfs = (bytes) => {
  const body = parseTfsPredictBody(parseTfsPredictJson(bytes));
  return tfsJsonToTensors(body.format, body.value, SPECS);
};
// As serve-invocation.ts reads a JSON body (on a decode thread or the event loop).
const sagemaker = (bytes) => {
  const body = parseTfsPredictBody(
    readFastJsonBody('sagemaker-json', bytes) ?? jsonToPredictBody(bytes.toString('utf8')),
  );
  return tfsJsonToTensors(body.format, body.value, SPECS);
};

const KINDS = [
  { kind: 'tfs-row', text: `{"instances": ${tensor}}`, decode: tfs },
  { kind: 'tfs-columnar', text: `{"inputs": {"input": ${tensor}}}`, decode: tfs },
  { kind: 'kserve-flat', text: kserve(flat), decode: (bytes) => decodeHttpInferRequest(bytes, undefined) },
  {
    kind: 'kserve-nested',
    text: kserve(tensor),
    decode: (bytes) => decodeHttpInferRequest(bytes, undefined),
  },
  { kind: 'sagemaker-list', text: tensor, decode: sagemaker },
];

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
// CPU time of this process (user + system, ms): on a shared box, steadier than wall time.
const time = (fn) => {
  const t = process.cpuUsage();
  fn();
  const d = process.cpuUsage(t);
  return (d.user + d.system) / 1000;
};

/** Checks that the decode gave the tensor's float32 values (bit for bit). */
function check(kind, result) {
  const data =
    result.inputs !== undefined && Array.isArray(result.inputs)
      ? result.inputs[0].tensor.data
      : Object.values(result)[0].data;
  if (!(data instanceof Float32Array) || data.length !== COUNT)
    throw new Error(`${kind}: not ${COUNT} floats`);
  for (let i = 0; i < COUNT; i++) {
    if (!Object.is(data[i], Math.fround(Number(texts[i])))) throw new Error(`${kind}: element ${i} differs`);
  }
}

const rows = [];
const only = args.kinds?.split(',');
for (const { kind, text, decode } of KINDS.filter((k) => only === undefined || only.includes(k.kind))) {
  const bytes = Buffer.from(text, 'utf8');
  check(kind, decode(bytes));
  // In blocks, each after its own warm-up: one way's garbage is then collected (partly by V8's
  // concurrent threads, which count in this process's CPU time) mostly inside its own block.
  // A forced gc() between calls would discard the optimized code of our reader and measure it cold.
  const block = (fn) => {
    for (let r = 0; r < 3; r++) fn();
    return Array.from({ length: ROUNDS }, () => time(fn));
  };
  const parse = [];
  const parseBytes = [];
  const ours = [];
  for (let pass = 0; pass < 2; pass++) {
    parse.push(...block(() => JSON.parse(text)));
    parseBytes.push(...block(() => JSON.parse(bytes.toString('utf8'))));
    ours.push(...block(() => decode(bytes)));
  }
  const row = {
    kind,
    mb: bytes.byteLength / 1e6,
    parseMs: median(parse),
    parseBytesMs: median(parseBytes),
    oursMs: median(ours),
  };
  row.ratio = row.oursMs / row.parseMs;
  rows.push(row);
}

const pad = (s, n) => String(s).padStart(n);
console.log(
  `${COUNT} float32 values, ${args.digits} digits, CPU ms, median of 2 x ${ROUNDS} calls (node ${process.version})`,
);
console.log(
  `${'body'.padEnd(15)}${pad('MB', 6)}${pad('JSON.parse', 12)}${pad('+toString', 11)}${pad('ours', 9)}${pad('ours/parse', 12)}`,
);
for (const r of rows) {
  console.log(
    `${r.kind.padEnd(15)}${pad(r.mb.toFixed(2), 6)}${pad(r.parseMs.toFixed(1), 12)}${pad(r.parseBytesMs.toFixed(1), 11)}` +
      `${pad(r.oursMs.toFixed(1), 9)}${pad(`${r.ratio.toFixed(2)}x`, 12)}`,
  );
}
if (args.json !== undefined)
  await writeFile(args.json, JSON.stringify({ digits: args.digits, rows }, null, 2));
