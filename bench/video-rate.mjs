#!/usr/bin/env node
// `visionserve video` in process against the model's own closed-loop rate. A clip is made with
// ffmpeg from ../shared/images/scene_soccer.jpg (--width wide, --seconds long at --fps); the
// floor is the same /invocations logic called in this process (startVisionServer, every
// listener off) back to back (one request in flight) on that clip's first frame as a JPEG;
// then `visionserve video` runs on the clip as a child process (ffmpeg decoding, a JPEG per
// frame, JSON lines to a pipe), at --concurrency 1 and 2, and with --output (annotated MP4).
// Rounds alternate floor and runs so that all see the same machine load.
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
  const frame = join(dir, 'frame.jpg');
  const ff = (args) => execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args]);
  ff([
    '-loop',
    '1',
    '-framerate',
    values.fps,
    '-i',
    join(SHARED, 'images', 'scene_soccer.jpg'),
    '-t',
    values.seconds,
    '-vf',
    `scale=${values.width}:-2,format=yuv420p`,
    '-c:v',
    'libx264',
    clip,
  ]);
  ff(['-i', clip, '-frames:v', '1', '-q:v', '2', frame]);
  const frames = Number(values.seconds) * Number(values.fps);
  const jpeg = await readFile(frame);

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
      const call = () =>
        server.invoke(
          { body: jpeg, contentType: 'image/jpeg', accept: 'application/json', customAttributes: '' },
          { signal: new AbortController().signal },
        );
      for (let i = 0; i < 5; i++) await call();
      const start = performance.now();
      for (let i = 0; i < frames; i++) await call();
      return frames / ((performance.now() - start) / 1000);
    } finally {
      await server.close();
    }
  };
  const video = (extra) =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [CLI, 'video', clip, '--model_base_path', base, ...extra], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      let lines = 0;
      child.stdout.on('data', (d) => (lines += d.toString().split('\n').length - 1));
      child.stderr.on('data', (d) => (err += d));
      child.on('close', (code) => {
        const m = /done: (\d+) frames in [\d.]+ s \(([\d.]+) frames\/s\)/.exec(err);
        if (code !== 0 || m === null || lines !== frames)
          reject(new Error(`video failed (${code}, ${lines} lines): ${err}`));
        else resolve(Number(m[2]));
      });
    });
  const runs = {
    'in-process /invocations, 1 in flight (floor)': floor,
    'visionserve video --concurrency 1': () => video(['--concurrency', '1']),
    'visionserve video (--concurrency 2, default)': () => video([]),
    'visionserve video --output annotated.mp4': () => video(['--output', join(dir, 'annotated.mp4')]),
  };
  const results = Object.fromEntries(Object.keys(runs).map((k) => [k, []]));
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const [name, run] of Object.entries(runs)) {
      results[name].push(await run());
      log(`round ${round + 1}: ${name}: ${results[name].at(-1).toFixed(1)} frames/s`);
    }
  }
  const floorRate = median(results['in-process /invocations, 1 in flight (floor)']);
  console.log(
    `YOLOX-Nano TF-OD, ${values.width}px-wide frames, ${frames} frames, ${values.rounds} rounds (median)\n`,
  );
  console.log('| path | frames/s (median) | runs | vs floor |\n| --- | --- | --- | --- |');
  for (const [name, xs] of Object.entries(results)) {
    console.log(
      `| ${name} | ${median(xs).toFixed(1)} | ${xs.map((x) => x.toFixed(1)).join(', ')} | ${(median(xs) / floorRate).toFixed(2)}× |`,
    );
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
