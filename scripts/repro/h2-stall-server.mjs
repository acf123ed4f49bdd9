// Our client channel against the real `visionserve serve` (2 instances, optionally batching max 8):
// a closed loop of 64 concurrent 2.1 MB Predict calls with 1.2 MB responses on one connection.
// Usage: node scripts/repro/h2-stall-server.mjs [seconds=5] [batch]   (after npx tsc -b packages/cli)
import { spawn, execSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { create, toBinary } from '@bufbuild/protobuf';
import { createGrpcChannel } from '@visionserve/client';
import { PredictRequestSchema, tensorToProto } from '@visionserve/protocol/tfs-proto';

const root = join(fileURLToPath(import.meta.url), '..', '..', '..');
const rounds = Number(process.argv[2] ?? 5);
const batch = process.argv[3] === 'batch';
const { rawDetectorModel } = await import(join(root, 'packages/cli/dist/src/tools/fixture-models.js'));
const dir = mkdtempSync(join(tmpdir(), 'stall-'));
const SIZE = 836,
  ANCHORS = 3000,
  CLASSES = 96;
mkdirSync(join(dir, 'm', '1'), { recursive: true });
writeFileSync(
  join(dir, 'm', '1', 'model.onnx'),
  rawDetectorModel({ size: SIZE, anchors: ANCHORS, classes: CLASSES }),
);
const flags = [
  'serve',
  '--host=127.0.0.1',
  '--port=0',
  '--rest_api_port=-1',
  '--sagemaker_port=-1',
  '--model_name=m',
  `--model_base_path=${join(dir, 'm')}`,
  '--enable_serialization_as_tensor_content',
  '--max_queue_wait_ms=0',
  '--model_instances=2',
];
if (batch) {
  writeFileSync(
    join(dir, 'b.txt'),
    'max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\nnum_batch_threads { value: 2 }\nmax_enqueued_batches { value: 1000 }\n',
  );
  flags.push('--enable_batching', `--batching_parameters_file=${join(dir, 'b.txt')}`);
}
const child = spawn(process.execPath, [join(root, 'packages/cli/bin/visionserve.js'), ...flags], {
  stdio: ['ignore', 'pipe', 'pipe'],
});
let text = '';
const port = await new Promise((resolve) => {
  const on = (d) => {
    text += d;
    const m = /"visionserve ready".*"grpc":(\d+)/.exec(text);
    if (m) resolve(Number(m[1]));
  };
  child.stdout.on('data', on);
  child.stderr.on('data', on);
  child.on('exit', () => {
    console.log(text);
    process.exit(3);
  });
});
const request = create(PredictRequestSchema, { modelSpec: { name: 'm' } });
request.inputs['input_tensor'] = tensorToProto(
  { dtype: 'uint8', shape: [1, SIZE, SIZE, 3], data: new Uint8Array(SIZE * SIZE * 3).fill(9) },
  { asTensorContent: true },
);
const message = toBinary(PredictRequestSchema, request);
const channel = createGrpcChannel({ address: `127.0.0.1:${port}` });
let stalled = false;
// A closed loop (as the sweep): 64 callers, each sending its next call when its answer arrives.
const call = () => channel.unary('/tensorflow.serving.PredictionService/Predict', message);
const durationMs = rounds * 1000;
const t0 = performance.now();
let done = 0;
let last = performance.now();
const loops = Promise.all(
  Array.from({ length: 64 }, async () => {
    while (!stalled && performance.now() - t0 < durationMs) {
      await call();
      done++;
      last = performance.now();
    }
  }),
);
const out = await new Promise((resolve) => {
  loops.then(
    () => resolve('ok'),
    (e) => resolve(`error ${e.message}`),
  );
  const iv = setInterval(() => {
    if (performance.now() - last > 5000) resolve('stalled');
  }, 200);
  loops.finally(() => clearInterval(iv));
});
console.log(`${out}: ${done} calls in ${(performance.now() - t0).toFixed(0)} ms`);
if (out === 'stalled') {
  stalled = true;
  console.log(execSync(`ss -tnm '( sport = :${port} or dport = :${port} )'`).toString());
}
child.kill('SIGKILL');
channel.close();
process.exit(stalled ? 2 : 0);
