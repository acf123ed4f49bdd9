#!/usr/bin/env node
// tf.Example parsing speed: our parser (@visionserve/protocol: parseSerializedExample +
// examplesToTensors, what the server runs for a signature cut after its ParseExample op) against
// TensorFlow's tf.io.parse_example on the same serialized examples, in one run.
//
//   npx tsc -b packages/cli && node bench/tf-example-parse.mjs [--python .venv-compat/bin/python]
//        [--batch 64] [--ms 500]
//
// Ours three ways: as served (tf-example-wire.ts's dense fast path straight into the batch
// tensors), the general path (each example read into features by the wire reader, then stacked;
// taken for errors and other dtypes), and the general path through protobuf-es's reflective
// decoder (the parser before tf-example-wire.ts).
// Two feature sets: half_plus_two's (x: float[1], x2: float[1] with a default; half the examples
// lack x2) and the estimator export's (age: float[1], pos: float[2], n: int64[1]; a third lack pos
// and n). TensorFlow is timed inside a tf.function (graph mode, as a served model runs it) and
// eagerly. Reports the median over 5 rounds of examples per second (each round --ms long), one
// thread each.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { examplesToTensors } from '../packages/protocol/dist/src/index.js';
import {
  ExampleSchema,
  denseExamplesToTensors,
  exampleFeaturesFromProto,
  parseSerializedExample,
} from '../packages/protocol/dist/src/tfs-proto/index.js';
import { fromBinary } from '@bufbuild/protobuf';

const { values: args } = parseArgs({
  options: {
    python: { type: 'string', default: '.venv-compat/bin/python' },
    batch: { type: 'string', default: '64' },
    ms: { type: 'string', default: '500' },
  },
});
const BATCH = Number(args.batch);
const ROUND_MS = Number(args.ms);
const ROUNDS = 5;

const SETS = {
  half_plus_two: [
    { key: 'x', dtype: 'float32', shape: [1] },
    { key: 'x2', dtype: 'float32', shape: [1], defaultValue: [0] },
  ],
  estimator: [
    { key: 'age', dtype: 'float32', shape: [1] },
    { key: 'pos', dtype: 'float32', shape: [2], defaultValue: [0.25, -1] },
    { key: 'n', dtype: 'int64', shape: [1], defaultValue: [3] },
  ],
};

// Writes the examples (length-prefixed) and times tf.io.parse_example on them.
const PYTHON = String.raw`
import json, os, struct, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
out_dir, batch, round_ms, rounds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
def f(v): return tf.train.Feature(float_list=tf.train.FloatList(value=v))
def i(v): return tf.train.Feature(int64_list=tf.train.Int64List(value=v))
sets = {
  "half_plus_two": ([{"x": f([rng.normal()]), **({"x2": f([rng.normal()])} if k % 2 else {})} for k in range(batch)],
                    {"x": tf.io.FixedLenFeature([1], tf.float32), "x2": tf.io.FixedLenFeature([1], tf.float32, [0.0])}),
  "estimator": ([{"age": f([rng.normal() * 20 + 40]), **({"pos": f(list(rng.normal(size=2))), "n": i([int(k)])} if k % 3 else {})}
                 for k in range(batch)],
                {"age": tf.io.FixedLenFeature([1], tf.float32), "pos": tf.io.FixedLenFeature([2], tf.float32, [0.25, -1.0]),
                 "n": tf.io.FixedLenFeature([1], tf.int64, [3])}),
}
def rate(fn, data):
    fn(data)
    results = []
    for _ in range(rounds):
        n, start = 0, time.perf_counter()
        while (time.perf_counter() - start) * 1000 < round_ms:
            fn(data); n += 1
        results.append(n * batch / (time.perf_counter() - start))
    return sorted(results)[rounds // 2]
report = {}
for name, (features, spec) in sets.items():
    blobs = [tf.train.Example(features=tf.train.Features(feature=x)).SerializeToString() for x in features]
    with open(os.path.join(out_dir, name), "wb") as fh:
        for b in blobs: fh.write(struct.pack("<I", len(b)) + b)
    data = tf.constant(blobs)
    graph = tf.function(lambda s: tf.io.parse_example(s, spec))
    report[name] = {"tf_function": rate(graph, data), "tf_eager": rate(lambda s: tf.io.parse_example(s, spec), data),
                    "bytes": sum(map(len, blobs)) / len(blobs)}
print(json.dumps({"tensorflow": tf.__version__, "sets": report}))
`;

function readExamples(file) {
  const buf = readFileSync(file);
  const out = [];
  for (let at = 0; at < buf.length;) {
    const n = buf.readUInt32LE(at);
    out.push(new Uint8Array(buf.buffer, buf.byteOffset + at + 4, n));
    at += 4 + n;
  }
  return out;
}

/** Through protobuf-es's reflective decoder (the parser before tf-example-wire.ts). */
const viaProtobufEs = (bytes) => exampleFeaturesFromProto(fromBinary(ExampleSchema, bytes));

/** What the server runs: the dense fast path, else the general one. */
const served = (blobs, specs) =>
  denseExamplesToTensors(blobs, specs) ??
  examplesToTensors({ examples: blobs.map(parseSerializedExample) }, specs);
/** The general path: each example read into features, then stacked. */
const generalWith = (parseOne) => (blobs, specs) =>
  examplesToTensors({ examples: blobs.map(parseOne) }, specs);

function ourRate(blobs, specs, run) {
  const parse = () => run(blobs, specs);
  for (let i = 0; i < 200; i++) parse();
  const results = [];
  for (let r = 0; r < ROUNDS; r++) {
    let n = 0;
    const start = performance.now();
    while (performance.now() - start < ROUND_MS) {
      parse();
      n++;
    }
    results.push((n * blobs.length * 1000) / (performance.now() - start));
  }
  return results.sort((a, b) => a - b)[ROUNDS >> 1];
}

const dir = mkdtempSync(join(tmpdir(), 'vs-tf-example-'));
try {
  const py = spawnSync(args.python, ['-c', PYTHON, dir, String(BATCH), String(ROUND_MS), String(ROUNDS)], {
    encoding: 'utf8',
  });
  if (py.status !== 0) throw new Error(`TensorFlow side failed:\n${py.stderr}`);
  const tf = JSON.parse(py.stdout.trim().split('\n').at(-1));
  const k = (v) => `${Math.round(v / 1000)}k`;
  console.log(
    `batch ${BATCH}, TensorFlow ${tf.tensorflow}, examples/s (median of ${ROUNDS} x ${ROUND_MS} ms)`,
  );
  console.log(
    '| feature set | bytes/example | ours (served) | general path | via protobuf-es | tf.function | tf eager | served / tf.function |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const [name, specs] of Object.entries(SETS)) {
    const blobs = readExamples(join(dir, name));
    const ours = ourRate(blobs, specs, served);
    const general = ourRate(blobs, specs, generalWith(parseSerializedExample));
    const generic = ourRate(blobs, specs, generalWith(viaProtobufEs));
    const t = tf.sets[name];
    console.log(
      `| ${name} | ${t.bytes.toFixed(1)} | ${k(ours)} | ${k(general)} | ${k(generic)} | ${k(t.tf_function)} | ${k(t.tf_eager)} | ${(ours / t.tf_function).toFixed(2)}x |`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
