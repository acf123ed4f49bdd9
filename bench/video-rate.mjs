#!/usr/bin/env node
// `visionserve video` in process against the model's own closed-loop rate. A clip is made with
// ffmpeg from ../shared/images/scene_soccer.jpg (a slow pan, --width wide, --seconds long at
// --fps); the floor is the same /invocations logic called in this process (startVisionServer,
// every listener off) back to back (one request in flight) on that clip's frames as JPEGs;
// then `visionserve video` runs on the clip as a child process (ffmpeg decoding, a JPEG per
// frame, JSON lines to a pipe), with 1 and 2 frames in flight, and with --output (annotated MP4).
// Rounds alternate floor and runs so that all see the same machine load. For the CLI runs the
// table gives its own figure (frames over its whole run, the first frame's slow first inference
// on a new input size included) and the steady rate from the first JSON line to the last, and
// the CPU per frame (the CLI's with its ffmpeg children, less a one-frame run's; the floor's
// process CPU over its timed loop).
//
//   npm run build && node bench/video-rate.mjs [--width 640] [--seconds 10] [--fps 10] [--rounds 3]
// Needs ffmpeg (scripts/setup-ffmpeg.sh) and ../shared. Prints a Markdown table on stdout.
import { execFileSync, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { resolveServerConfig, silentLogger, startVisionServer } from '@visionserve/server';
import { TFOD_DETECTOR_VISION_CONFIG } from '@visionserve/vision';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SHARED = join(ROOT, '..', 'shared');
const CLI = join(ROOT, 'packages', 'cli', 'bin', 'visionserve.js');
const { values } = parseArgs({
  options: {
    width: { type: 'string', default: '640' },
    seconds: { type: 'string', default: '10' },
    fps: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
  },
});
const log = (s) => process.stderr.write(`${s}\n`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const dir = await mkdtemp(join(tmpdir(), 'vs-video-bench-'));
try {
  const base = join(dir, 'detector');
  await mkdir(join(base, '1'), { recursive: true });
  await copyFile(join(SHARED, 'models', 'yolox_nano_tfod.onnx'), join(base, '1', 'model.onnx'));
  await copyFile(join(SHARED, 'models', 'mscoco_label_map.pbtxt'), join(base, 'mscoco_label_map.pbtxt'));
  await writeFile(join(base, 'visionserve.json'), JSON.stringify(TFOD_DETECTOR_VISION_CONFIG));
  const clip = join(dir, 'clip.mp4');
  const ff = (args) => execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args]);
  // A slow pan across the photo, so that every frame differs (a still clip would let the floor's
  // identical requests hit libvips' operation cache).
  const pan = `crop=1000:666:x='min(280,280*t/${values.seconds})':y=100,scale=${values.width}:-2,format=yuv420p`;
  const photo = join(SHARED, 'images', 'scene_soccer.jpg');
  ff([
    '-loop',
    '1',
    '-framerate',
    values.fps,
    '-i',
    photo,
    '-t',
    values.seconds,
    '-vf',
    pan,
    '-c:v',
    'libx264',
    clip,
  ]);
  await mkdir(join(dir, 'frames'));
  ff(['-i', clip, '-q:v', '2', join(dir, 'frames', '%04d.jpg')]);
  const frames = Number(values.seconds) * Number(values.fps);
  const jpegs = await Promise.all(
    Array.from({ length: frames }, (_, i) =>
      readFile(join(dir, 'frames', `${String(i + 1).padStart(4, '0')}.jpg`)),
    ),
  );

  const floor = async () => {
    const config = resolveServerConfig({
      modelBasePath: base,
      grpcPort: -1,
      restPort: -1,
      sagemakerPort: -1,
      fileSystemPollSeconds: 0,
      maxQueueWaitMs: 0,
    });
    const server = await startVisionServer(config, silentLogger);
    try {
      const call = (jpeg) =>
        server.invoke(
          { body: jpeg, contentType: 'image/jpeg', accept: 'application/json', customAttributes: '' },
          { signal: new AbortController().signal },
        );
      for (let i = 0; i < 5; i++) await call(jpegs[i]);
      const cpu = process.cpuUsage();
      const start = performance.now();
      for (let i = 0; i < frames; i++) await call(jpegs[i]);
      const rate = frames / ((performance.now() - start) / 1000);
      const used = process.cpuUsage(cpu);
      return { total: rate, steady: rate, cpuMsPerFrame: (used.user + used.system) / 1000 / frames };
    } finally {
      await server.close();
    }
  };
  const video = (extra) =>
    new Promise((resolve, reject) => {
      // /usr/bin/time gives the CPU of visionserve and its ffmpeg children together.
      const child = spawn(
        '/usr/bin/time',
        ['-f', 'cpu %U %S', process.execPath, CLI, 'video', clip, '--model_base_path', base, ...extra],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let err = '';
      let lines = 0;
      let first;
      let last;
      child.stdout.on('data', (d) => {
        const n = d.toString().split('\n').length - 1;
        if (n === 0) return;
        const now = performance.now();
        if (lines === 0) first = now;
        lines += n;
        last = now;
      });
      child.stderr.on('data', (d) => (err += d));
      child.on('close', (code) => {
        const m = /done: (\d+) frames in [\d.]+ s \(([\d.]+) frames\/s\)/.exec(err);
        const cpu = /cpu ([\d.]+) ([\d.]+)/.exec(err);
        const seconds = cpu === null ? NaN : Number(cpu[1]) + Number(cpu[2]);
        const expected = extra.includes('--max-frames') ? 1 : frames;
        if (code !== 0 || m === null || lines !== expected)
          reject(new Error(`video failed (${code}, ${lines} lines): ${err}`));
        // The CLI's own figure (frames / its run time) and the steady rate after the first line.
        else resolve({ total: Number(m[2]), steady: (lines - 1) / ((last - first) / 1000), seconds });
      });
    });
  const runs = {
    'in-process /invocations, 1 in flight (floor)': floor,
    'visionserve video (--concurrency 1, default)': () => video([]),
    'visionserve video --concurrency 2': () => video(['--concurrency', '2']),
    'visionserve video --output annotated.mp4': () => video(['--output', join(dir, 'annotated.mp4')]),
  };
  const results = Object.fromEntries(Object.keys(runs).map((k) => [k, []]));
  const startups = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    // CPU of a run that answers one frame: start-up, model load, first inference.
    startups.push((await video(['--max-frames', '1'])).seconds);
    for (const [name, run] of Object.entries(runs)) {
      results[name].push(await run());
      const r = results[name].at(-1);
      r.cpuMsPerFrame ??= ((r.seconds - startups.at(-1)) * 1000) / (frames - 1);
      log(
        `round ${round + 1}: ${name}: ${r.total.toFixed(1)} frames/s (steady ${r.steady.toFixed(1)}), ` +
          `${r.cpuMsPerFrame.toFixed(1)} ms CPU/frame`,
      );
    }
  }
  const floorRate = median(results['in-process /invocations, 1 in flight (floor)'].map((r) => r.total));
  console.log(
    `YOLOX-Nano TF-OD, ${values.width}px-wide frames, ${frames} frames, ${values.rounds} rounds (median)\n`,
  );
  console.log(
    '| path | frames/s (whole run) | steady, after the first frame | runs (whole) | steady vs floor | CPU ms/frame |',
  );
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const [name, rs] of Object.entries(results)) {
    const total = median(rs.map((r) => r.total));
    const steady = median(rs.map((r) => r.steady));
    console.log(
      `| ${name} | ${total.toFixed(1)} | ${steady.toFixed(1)} | ${rs.map((r) => r.total.toFixed(1)).join(', ')} | ` +
        `${(steady / floorRate).toFixed(2)}× | ${median(rs.map((r) => r.cpuMsPerFrame)).toFixed(1)} |`,
    );
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
