/**
 * The console's Live view in real Chromium (Debian's package, scripts/setup-browser.sh) with a
 * fake camera that plays a clip made by the test with real ffmpeg from scene_soccer.jpg, against
 * a real server with the TF-OD detector: frames go over the WebSocket frame stream and the boxes
 * come back drawn over the picture. Then a chosen video file (WebM) instead of the camera.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type Browser, type Page, chromium } from 'playwright-core';
import { IMAGES } from './helpers/shared.js';
import { ffmpegMissing, findChromium } from './helpers/system-tools.js';
import { tempRepo } from './helpers/model-repo.js';
import { placeDetector } from './helpers/sagemaker-models.js';
import { startHarness, type Harness } from './helpers/server-harness.js';

const browserBinary = findChromium();
const skip = 'reason' in browserBinary ? browserBinary.reason : ffmpegMissing();
const run = promisify(execFile);

/** A clip of scene_soccer.jpg held still, as ffmpeg writes it (y4m for the fake camera, webm for a file). */
async function soccerClip(dir: string, file: string, codecArgs: readonly string[]): Promise<string> {
  const out = join(dir, file);
  await run(
    'ffmpeg',
    [
      '-hide_banner',
      '-loglevel',
      'error',
      '-y',
      '-loop',
      '1',
      '-i',
      join(IMAGES, 'scene_soccer.jpg'),
      '-t',
      '2',
      '-r',
      '10',
      '-vf',
      'scale=640:-2,format=yuv420p',
      ...codecArgs,
      out,
    ],
    { timeout: 120_000 },
  );
  return out;
}

interface LiveState {
  answered: number;
  dropped: number;
  latencyMs: number;
  boxes: number;
  labels: string;
  stats: string;
}

/** What the view shows: its stats line ("… frames/s · latency … ms · D dropped · A answered"), labels and boxes. */
async function liveState(page: Page): Promise<LiveState> {
  const seen = await page.evaluate<{ stats: string; labels: string; boxes: number }>(`(() => ({
    stats: document.getElementById('live-stats')?.textContent ?? '',
    labels: document.getElementById('live-labels')?.textContent ?? '',
    boxes: Number(document.querySelector('[data-testid=live-canvas]')?.getAttribute('data-boxes') ?? 0),
  }))()`);
  const number = (re: RegExp): number => Number(re.exec(seen.stats)?.[1] ?? NaN);
  return {
    ...seen,
    answered: number(/(\d+) answered/),
    dropped: number(/(\d+) dropped/),
    latencyMs: number(/latency ([\d.]+) ms/),
  };
}

/**
 * Pixels of the Live canvas that differ from the bare video frame drawn by the test: the overlay
 * (the clip is a still picture, so the frame under it is the same).
 */
async function overlayPixels(page: Page): Promise<number> {
  return page.evaluate<number>(`(() => {
    const shown = document.querySelector('[data-testid=live-canvas]');
    const video = document.querySelector('main video');
    const bare = document.createElement('canvas');
    bare.width = shown.width;
    bare.height = shown.height;
    const b = bare.getContext('2d');
    b.drawImage(video, 0, 0, bare.width, bare.height);
    const x = shown.getContext('2d').getImageData(0, 0, shown.width, shown.height).data;
    const y = b.getImageData(0, 0, bare.width, bare.height).data;
    let differ = 0;
    for (let i = 0; i < x.length; i += 4) {
      if (Math.abs(x[i] - y[i]) + Math.abs(x[i + 1] - y[i + 1]) + Math.abs(x[i + 2] - y[i + 2]) > 90) differ++;
    }
    return differ;
  })()`);
}

/** Polls the view's stats line (the page's CSP forbids the string predicates of waitForFunction). */
async function waitForAnswers(page: Page, count: number): Promise<void> {
  const until = Date.now() + 120_000;
  for (;;) {
    const state = await liveState(page);
    if (state.answered >= count) return;
    if (Date.now() > until) throw new Error(`fewer than ${count} answers: ${JSON.stringify(state)}`);
    await page.waitForTimeout(200);
  }
}

describe('console Live view in Chromium (fake camera, video file)', { skip }, () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vs-live-'));
    const root = await tempRepo();
    await placeDetector(root);
    await writeFile(
      join(root, 'models.config'),
      "model_config_list { config { name: 'detector' base_path: 'detector' } }",
    );
    h = await startHarness({ modelConfigFile: join(root, 'models.config'), fileSystemPollSeconds: 0 });
    const camera = await soccerClip(dir, 'camera.y4m', []);
    browser = await chromium.launch({
      executablePath: (browserBinary as { path: string }).path,
      args: [
        '--no-sandbox',
        '--disable-dev-shm-usage',
        '--disable-gpu',
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
        `--use-file-for-fake-video-capture=${camera}`,
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
    await context.grantPermissions(['camera'], { origin: h.rest });
    page = await context.newPage();
  });
  after(async () => {
    await browser?.close();
    await h?.close();
  });

  it('the camera (CSP enforced): frames stream to the detector, boxes labelled person are drawn over the picture', async () => {
    await page.goto(`${h.rest}/console/#live`);
    await page.selectOption('#live-model', 'detector');
    await page.click('#live-camera');
    await waitForAnswers(page, 5);
    const state = await liveState(page);
    assert.match(state.labels, /person/);
    assert.ok(state.boxes >= 2, `boxes drawn: ${state.boxes}`);
    assert.ok(state.latencyMs > 0 && state.latencyMs < 120_000, JSON.stringify(state));
    assert.ok((await overlayPixels(page)) > 500, 'overlay pixels over the picture');
    await page.screenshot({ path: join(tmpdir(), 'vs-console-live-camera.png'), fullPage: true });
  });

  it('Stop ends the stream and the drawing', async () => {
    await page.click('#live-stop');
    assert.equal((await liveState(page)).stats, 'Stopped.');
    await page.waitForTimeout(1500);
    assert.equal((await liveState(page)).stats, 'Stopped.');
  });

  it('a chosen video file (WebM) streams the same way', async () => {
    const clip = await soccerClip(dir, 'clip.webm', ['-c:v', 'libvpx', '-b:v', '1M']);
    await page.goto(`${h.rest}/console/#models`);
    await page.goto(`${h.rest}/console/#live`);
    await page.selectOption('#live-model', 'detector');
    await page.setInputFiles('#live-file', clip);
    await waitForAnswers(page, 3);
    const state = await liveState(page);
    assert.match(state.labels, /person/);
    assert.ok(state.boxes >= 2, `boxes drawn: ${state.boxes}`);
    assert.ok((await overlayPixels(page)) > 500, 'overlay pixels over the picture');
    // The clip plays at 10 frames/s and each video frame is sent once: a model faster than that
    // answers at most about 10 a second, not as many as it could run.
    const t0 = performance.now();
    await page.waitForTimeout(3000);
    const later = await liveState(page);
    const perS = (later.answered - state.answered) / ((performance.now() - t0) / 1000);
    assert.ok(perS <= 15, `${perS.toFixed(1)} answers/s from a 10 frames/s clip`);
    await page.screenshot({ path: join(tmpdir(), 'vs-console-live-file.png'), fullPage: true });
  });
});
