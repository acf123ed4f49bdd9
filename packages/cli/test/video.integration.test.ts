/**
 * `visionserve video` and video inputs of `visionserve transform`, end to end: the real CLI
 * as a child process, real ffmpeg (Debian's package; scripts/setup-ffmpeg.sh installs it when
 * missing, else the tests skip with the reason), the YOLOX TF-OD detector from ../shared on
 * clips the tests make with ffmpeg from scene_soccer.jpg.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { readFile, readdir, rm, writeFile, mkdir } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TFOD_DETECTOR_VISION_CONFIG } from '@visionserve/vision';
import { IMAGES, REPO_ROOT } from './helpers/shared.js';
import { tempRepo } from './helpers/model-repo.js';
import { placeDetector } from './helpers/sagemaker-models.js';

const CLI = join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js');
const SOCCER = join(IMAGES, 'scene_soccer.jpg');
const run = promisify(execFile);

function ffmpegMissing(): string | false {
  const has = (): boolean =>
    spawnSync('ffmpeg', ['-version']).status === 0 && spawnSync('ffprobe', ['-version']).status === 0;
  if (has()) return false;
  const setup = spawnSync('bash', [join(REPO_ROOT, 'scripts', 'setup-ffmpeg.sh')], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (has()) return false;
  return `ffmpeg is not installed and scripts/setup-ffmpeg.sh could not install it: ${(setup.stderr || setup.stdout || String(setup.error)).trim()}`;
}

const skip = ffmpegMissing();

async function ffmpeg(args: readonly string[]): Promise<void> {
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args], { timeout: 120_000 });
}

async function cli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      encoding: 'utf8',
      timeout: 240_000,
      maxBuffer: 64 * 1024 * 1024,
      env,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

interface Box {
  ymin: number;
  xmin: number;
  ymax: number;
  xmax: number;
}
interface Detection {
  label: string;
  score: number;
  box: Box;
  box_pixels: Box;
  track_id?: number;
}
interface FrameLine {
  frame: number;
  time_s: number;
  result: { predictions: [{ num_detections: number; detections: Detection[] }] };
}

function frameLines(stdout: string): FrameLine[] {
  return stdout
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as FrameLine);
}

const labelsOf = (line: FrameLine): string[] => line.result.predictions[0].detections.map((d) => d.label);

/** ffprobe's view of a video's first stream. */
async function probe(
  file: string,
): Promise<{ codec_name: string; width: number; height: number; nb_frames: string }> {
  const { stdout } = await run('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    'v:0',
    '-count_frames',
    '-show_entries',
    'stream=codec_name,width,height,nb_frames,nb_read_frames',
    '-of',
    'json',
    file,
  ]);
  return (
    JSON.parse(stdout) as {
      streams: [{ codec_name: string; width: number; height: number; nb_frames: string }];
    }
  ).streams[0];
}

/** One frame of a video as raw RGB (ffmpeg). */
async function rgbFrame(file: string, index: number, width: number, height: number): Promise<Buffer> {
  const { stdout } = await run(
    'ffmpeg',
    [
      '-hide_banner',
      '-loglevel',
      'error',
      '-i',
      file,
      '-vf',
      `select=eq(n\\,${index})`,
      '-frames:v',
      '1',
      '-f',
      'rawvideo',
      '-pix_fmt',
      'rgb24',
      'pipe:1',
    ],
    { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 },
  );
  assert.equal(stdout.length, width * height * 3);
  return stdout;
}

/** Mean absolute RGB difference of two frames over the pixels `inside` selects. */
function meanDiff(a: Buffer, b: Buffer, width: number, inside: (x: number, y: number) => boolean): number {
  let sum = 0;
  let n = 0;
  for (let i = 0; i < a.length; i += 3) {
    const p = i / 3;
    if (!inside(p % width, Math.floor(p / width))) continue;
    sum += Math.abs(a[i]! - b[i]!) + Math.abs(a[i + 1]! - b[i + 1]!) + Math.abs(a[i + 2]! - b[i + 2]!);
    n += 3;
  }
  return sum / Math.max(1, n);
}

describe('visionserve video (real ffmpeg, YOLOX TF-OD detector)', { skip }, () => {
  let dir: string;
  let detector: string;
  let clip: string;
  before(async () => {
    dir = await tempRepo('vs-video-');
    detector = await placeDetector(dir, 'detector');
    clip = join(dir, 'soccer.mp4');
    // 2 s at 10 frames/s of the photo scaled to 640 wide.
    await ffmpeg([
      '-loop',
      '1',
      '-framerate',
      '10',
      '-i',
      SOCCER,
      '-t',
      '2',
      '-vf',
      'scale=640:-2,format=yuv420p',
      '-c:v',
      'libx264',
      clip,
    ]);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('prints one line per sampled frame with the persons and the ball, and writes an annotated MP4', async () => {
    const annotated = join(dir, 'annotated.mp4');
    const r = await cli(['video', clip, '--model_base_path', detector, '--fps', '5', '--output', annotated]);
    assert.equal(r.code, 0, r.stderr);
    const lines = frameLines(r.stdout);
    assert.deepEqual(
      lines.map((l) => l.frame),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    assert.deepEqual(
      lines.map((l) => l.time_s),
      [0, 0.2, 0.4, 0.6, 0.8, 1, 1.2, 1.4, 1.6, 1.8],
    );
    for (const line of lines) {
      const labels = labelsOf(line);
      assert.equal(labels.filter((l) => l === 'person').length, 3, JSON.stringify(labels));
      assert.equal(labels.filter((l) => l === 'sports ball').length, 1, JSON.stringify(labels));
      assert.equal(line.result.predictions[0].detections[0]!.track_id, undefined, 'no tracking configured');
    }
    assert.match(r.stderr, /done: 10 frames in [\d.]+ s \([\d.]+ frames\/s\), 0 dropped, 0 failed/);

    const info = await probe(annotated);
    assert.equal(info.codec_name, 'h264');
    assert.deepEqual([info.width, info.height], [640, 426]);
    assert.equal(Number((info as { nb_read_frames?: string }).nb_read_frames), 10);
    // The ball's box is drawn: its outline differs from the source frame, the grass far from any box does not.
    const ball = lines[0]!.result.predictions[0].detections.find(
      (d) => d.label === 'sports ball',
    )!.box_pixels;
    const [drawn, plain] = await Promise.all([rgbFrame(annotated, 0, 640, 426), rgbFrame(clip, 0, 640, 426)]);
    const onOutline = (x: number, y: number): boolean =>
      x >= ball.xmin && x <= ball.xmax && Math.abs(y - ball.ymax) <= 1;
    const farAway = (x: number, y: number): boolean => x >= 560 && y >= 400;
    assert.ok(meanDiff(drawn, plain, 640, onOutline) > 40, 'box outline drawn');
    assert.ok(meanDiff(drawn, plain, 640, farAway) < 8, 'rest of the frame unchanged');
  });

  it('keeps track ids of objects moving along known paths (tracking from visionserve.json)', async () => {
    const tracked = await placeDetector(dir, 'tracked');
    await writeFile(
      join(tracked, 'visionserve.json'),
      JSON.stringify({ ...TFOD_DETECTOR_VISION_CONFIG, tracking: { kind: 'bytetrack' } }),
    );
    // A person cut from the photo walks right to left at 160 px/s and the ball rolls left to
    // right at 240 px/s below it, over a plain pitch, 3 s at 12 frames/s.
    const moving = join(dir, 'moving.mp4');
    await ffmpeg([
      '-f',
      'lavfi',
      '-i',
      'color=c=0x4a7a3a:s=960x600:r=12:d=3',
      '-loop',
      '1',
      '-framerate',
      '12',
      '-i',
      SOCCER,
      '-loop',
      '1',
      '-framerate',
      '12',
      '-i',
      SOCCER,
      '-filter_complex',
      '[1:v]crop=138:126:941:686[ball];[2:v]crop=240:568:57:198,scale=180:426[man];' +
        "[0:v][man]overlay=x='700-160*t':y=10:shortest=1[a];[a][ball]overlay=x='20+240*t':y=460:shortest=1,format=yuv420p",
      '-t',
      '3',
      '-c:v',
      'libx264',
      moving,
    ]);
    const r = await cli(['video', moving, '--model_base_path', tracked]);
    assert.equal(r.code, 0, r.stderr);
    const lines = frameLines(r.stdout);
    assert.equal(lines.length, 36);
    const paths: Record<string, (t: number) => number> = {
      person: (t) => 700 - 160 * t + 90,
      'sports ball': (t) => 20 + 240 * t + 69,
    };
    const ids: Record<string, Set<number>> = { person: new Set(), 'sports ball': new Set() };
    const seen: Record<string, number> = { person: 0, 'sports ball': 0 };
    for (const line of lines) {
      for (const d of line.result.predictions[0].detections) {
        const path = paths[d.label];
        assert.ok(path !== undefined, `unexpected ${d.label} in frame ${line.frame}`);
        const centre = (d.box_pixels.xmin + d.box_pixels.xmax) / 2;
        assert.ok(
          Math.abs(centre - path(line.time_s)) < 30,
          `${d.label} off its path in frame ${line.frame}`,
        );
        assert.ok(d.track_id !== undefined);
        ids[d.label]!.add(d.track_id);
        seen[d.label]!++;
      }
    }
    assert.ok(seen['person']! >= 33, `person in ${seen['person']} frames`);
    assert.ok(seen['sports ball']! >= 6, `ball in ${seen['sports ball']} frames`);
    assert.equal(ids['person']!.size, 1, 'one id for the person');
    assert.equal(ids['sports ball']!.size, 1, 'one id for the ball');
    assert.notDeepEqual([...ids['person']!], [...ids['sports ball']!]);
    // --track off: the same boxes without ids.
    const off = await cli([
      'video',
      moving,
      '--model_base_path',
      tracked,
      '--track',
      'off',
      '--max-frames',
      '3',
    ]);
    assert.equal(off.code, 0, off.stderr);
    const offLines = frameLines(off.stdout);
    assert.equal(offLines.length, 3);
    assert.ok(
      offLines.every((l) => l.result.predictions[0].detections.every((d) => d.track_id === undefined)),
    );
  });

  it('reads an HTTP stream: HLS served over HTTP, and a live MPEG-TS stream from ffmpeg -listen', async () => {
    const hls = join(dir, 'hls');
    await mkdir(hls);
    await ffmpeg([
      '-i',
      clip,
      '-c',
      'copy',
      '-f',
      'hls',
      '-hls_time',
      '1',
      '-hls_list_size',
      '0',
      join(hls, 'index.m3u8'),
    ]);
    const server = http.createServer((req, res) => {
      readFile(join(hls, (req.url ?? '/').slice(1).replace(/[^\w.]/g, '')))
        .then((body) => res.end(body))
        .catch(() => res.writeHead(404).end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/index.m3u8`;
      const r = await cli(['video', url, '--model_base_path', detector, '--fps', '5', '--policy', 'all']);
      assert.equal(r.code, 0, r.stderr);
      const lines = frameLines(r.stdout);
      assert.equal(lines.length, 10);
      for (const line of lines) assert.ok(labelsOf(line).includes('sports ball'), `frame ${line.frame}`);
    } finally {
      server.close();
    }

    // A live stream: ffmpeg serves the clip three times over (6 s) in real time on one HTTP connection.
    const port = await freePort();
    const live: ChildProcess = spawn(
      'ffmpeg',
      [
        '-hide_banner',
        '-loglevel',
        'error',
        '-re',
        '-stream_loop',
        '2',
        '-i',
        clip,
        '-c',
        'copy',
        '-f',
        'mpegts',
        '-listen',
        '1',
        `http://127.0.0.1:${port}/live.ts`,
      ],
      { stdio: 'ignore' },
    );
    try {
      await listening(port);
      const r = await cli([
        'video',
        `http://127.0.0.1:${port}/live.ts`,
        '--model_base_path',
        detector,
        '--fps',
        '5',
      ]);
      assert.equal(r.code, 0, r.stderr);
      const lines = frameLines(r.stdout);
      // The latest policy (the default for URLs) drops the frames that arrive while the model
      // is busy (its first run is slow) and says so; every frame is answered or dropped.
      const dropped = Number(/, (\d+) dropped,/.exec(r.stderr)?.[1]);
      assert.equal(lines.length + dropped, 30, r.stderr);
      assert.ok(lines.length >= 15, `${lines.length} lines`);
      assert.equal(lines.at(-1)!.frame, 29);
      for (const line of lines) assert.ok(labelsOf(line).includes('person'), `frame ${line.frame}`);
      assert.ok(lines.every((l, i) => i === 0 || l.frame > lines[i - 1]!.frame));
    } finally {
      live.kill('SIGKILL');
    }
  });

  it('reads an RTSP stream (rtsp-server-perl, fed by ffmpeg)', { skip: rtspServerMissing() }, async () => {
    const [clientPort, sourcePort] = [await freePort(), await freePort()];
    const server = spawn(
      'rtsp-server-perl',
      [
        '-c',
        String(clientPort),
        '-s',
        String(sourcePort),
        '--rtp_start_port',
        String(20_000 + (clientPort % 20_000)),
      ],
      { stdio: 'ignore' },
    );
    let publisher: ChildProcess | undefined;
    try {
      await listening(sourcePort);
      publisher = spawn(
        'ffmpeg',
        [
          '-hide_banner',
          '-loglevel',
          'error',
          '-re',
          '-stream_loop',
          '-1',
          '-i',
          clip,
          '-c',
          'copy',
          '-f',
          'rtsp',
          `rtsp://127.0.0.1:${sourcePort}/pitch`,
        ],
        { stdio: 'ignore' },
      );
      const url = `rtsp://127.0.0.1:${clientPort}/pitch`;
      await playable(url);
      const r = await cli(['video', url, '--model_base_path', detector, '--fps', '5', '--max-frames', '12']);
      assert.equal(r.code, 0, r.stderr);
      const lines = frameLines(r.stdout);
      assert.equal(lines.length, 12);
      // RTP over UDP on a busy machine may lose a packet: most frames, not all, show the players.
      const withPersons = lines.filter((l) => labelsOf(l).filter((x) => x === 'person').length >= 2).length;
      assert.ok(withPersons >= 9, `${withPersons} of 12 frames with players`);
    } finally {
      publisher?.kill('SIGKILL');
      server.kill('SIGKILL');
    }
  });

  it('turns a video input of transform into one .out of JSON lines, beside an image input', async () => {
    const input = join(dir, 'transform-in');
    const output = join(dir, 'transform-out');
    await mkdir(input);
    await writeFile(join(input, 'match.mp4'), await readFile(clip));
    await writeFile(join(input, 'photo.jpg'), await readFile(SOCCER));
    const r = await cli(['transform', '--input', input, '--output', output, '--model_base_path', detector]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual((await readdir(output)).filter((f) => f.endsWith('.out')).sort(), [
      'match.mp4.out',
      'photo.jpg.out',
    ]);
    const lines = frameLines(await readFile(join(output, 'match.mp4.out'), 'utf8'));
    assert.deepEqual(
      lines.map((l) => l.frame),
      [...Array(20).keys()],
    );
    assert.ok(lines.every((l) => labelsOf(l).includes('sports ball')));
    const summary = JSON.parse(r.stdout) as { files: number; filesWritten: number; records: number };
    assert.deepEqual([summary.files, summary.filesWritten, summary.records], [2, 2, 21]);
  });

  it('fails clearly: no ffmpeg, not a video, an unknown model, bad options', async () => {
    const noFfmpeg = await cli(['video', clip, '--model_base_path', detector], {
      ...process.env,
      VISIONSERVE_FFMPEG: join(dir, 'no-such-ffmpeg'),
    });
    assert.equal(noFfmpeg.code, 1);
    assert.match(noFfmpeg.stderr, /needs ffmpeg, which is not installed: install Debian's ffmpeg package/);
    const notVideo = join(dir, 'notes.mp4');
    await writeFile(notVideo, 'this is text, not a video');
    const bad = await cli(['video', notVideo, '--model_base_path', detector]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /ffprobe failed .*Invalid data found/);
    const unknown = await cli(['video', clip, '--model_base_path', detector, '--model', 'nope']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /NOT_FOUND: .*nope/);
    const usage = await cli(['video', clip, '--model_base_path', detector, '--fps', '0']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--fps expects a positive number/);
    assert.equal((await cli(['video', '--model_base_path', detector])).code, 2);
  });
});

function rtspServerMissing(): string | false {
  if (skip !== false) return skip;
  const has = (): boolean => spawnSync('rtsp-server-perl', ['--help']).status === 0;
  if (has()) return false;
  const setup = spawnSync('bash', [join(REPO_ROOT, 'scripts', 'setup-rtsp-server.sh')], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (has()) return false;
  return `rtsp-server-perl is not installed and scripts/setup-rtsp-server.sh could not install it: ${(setup.stderr || setup.stdout || String(setup.error)).trim()}`;
}

/** Waits until ffprobe can open an RTSP URL (the publisher has announced it). */
async function playable(url: string): Promise<void> {
  let last = '';
  for (let i = 0; i < 40; i++) {
    try {
      await run('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_name', '-of', 'csv', url], {
        timeout: 10_000,
      });
      return;
    } catch (error) {
      last = String((error as { stderr?: string }).stderr ?? error);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(`${url} never became playable: ${last}`);
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** Waits until a TCP port is in LISTEN state (from /proc/net/tcp, without connecting: ffmpeg -listen 1 serves one connection). */
async function listening(port: number): Promise<void> {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (let i = 0; i < 200; i++) {
    const table = await readFile('/proc/net/tcp', 'utf8');
    if (table.split('\n').some((l) => l.includes(`:${hex} `) && / 0A /.test(l))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on port ${port}`);
}
