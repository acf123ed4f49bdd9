/**
 * The web console in a real browser: Playwright (playwright-core) drives the Debian
 * `chromium` package (scripts/setup-browser.sh installs it when missing; without it the
 * test is skipped with the reason). A real server with MobileNetV2 and the TF-OD detector,
 * metrics on. Screenshots go to a temp directory, or to docs/ with UPDATE_SCREENSHOTS=1 (not
 * the Try-it page, which shows a photo from ../shared). The Live view runs in a second browser
 * whose fake camera plays scene_soccer.jpg.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type Page, chromium } from 'playwright-core';
import sharp from 'sharp';
import { IMAGES, REPO_ROOT } from './helpers/shared.js';
import { findChromium } from './helpers/system-tools.js';
import { tempRepo } from './helpers/model-repo.js';
import { placeDetector, placeMobilenet } from './helpers/sagemaker-models.js';
import { grpcPredict, startHarness, type Harness } from './helpers/server-harness.js';

const browserBinary = findChromium();
const skip = 'reason' in browserBinary ? browserBinary.reason : false;
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core on the current page: violations of impact serious or critical. */
async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.addScriptTag({ content: axeSource });
  const violations = await page.evaluate<AxeViolation[]>('window.axe.run().then((r) => r.violations)');
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

describe('web console in Chromium (Playwright)', { skip }, () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let shots: string;
  const a11y: Record<string, AxeViolation[]> = {};

  before(async () => {
    const root = await tempRepo();
    await placeMobilenet(root);
    await placeDetector(root);
    await writeFile(
      join(root, 'models.config'),
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'detector' base_path: 'detector' }
      }`,
    );
    await writeFile(join(root, 'monitoring.config'), 'prometheus_config { enable: true }\n');
    h = await startHarness({
      modelConfigFile: join(root, 'models.config'),
      monitoringConfigFile: join(root, 'monitoring.config'),
      fileSystemPollSeconds: 0,
    });
    shots =
      process.env['UPDATE_SCREENSHOTS'] === '1'
        ? join(REPO_ROOT, 'docs')
        : await mkdtemp(join(tmpdir(), 'vs-shots-'));
    browser = await chromium.launch({
      executablePath: (browserBinary as { path: string }).path,
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    });
    // The console's CSP forbids inline scripts; axe and Playwright's string evaluations are injected.
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
    page = await context.newPage();
  });
  after(async () => {
    await browser?.close();
    await h?.close();
  });

  it('Models lists every model with its versions, states and signatures', async () => {
    await page.goto(`${h.rest}/console/`);
    const cards = page.locator('[data-testid=model]');
    await cards.first().waitFor();
    assert.deepEqual(
      (
        await page.evaluate<string[]>(
          "[...document.querySelectorAll('[data-testid=model]')].map((e) => e.getAttribute('data-model'))",
        )
      ).sort(),
      ['detector', 'mobilenet'],
    );
    const mobilenet = page.locator('[data-model=mobilenet]');
    assert.match(await mobilenet.innerText(), /AVAILABLE/);
    assert.match(await mobilenet.innerText(), /float32/);
    assert.match(await mobilenet.innerText(), /1000 labels/);
    a11y['models'] = await seriousViolations(page);
    await page.screenshot({ path: join(shots, 'console-models.png') });
  });

  it('Try it: dropping cat_tabby.jpg shows tabby first', async () => {
    await page.goto(`${h.rest}/console/#try`);
    await page.selectOption('#try-model', 'mobilenet');
    const bytes = readFileSync(join(IMAGES, 'cat_tabby.jpg')).toString('base64');
    // A real drop event carrying the file, as a user's drag and drop sends it.
    await page.evaluate(`(() => {
      const raw = Uint8Array.from(atob('${bytes}'), (c) => c.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([raw], 'cat_tabby.jpg', { type: 'image/jpeg' }));
      document.getElementById('drop').dispatchEvent(
        new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }),
      );
    })()`);
    const first = page.locator('[data-testid=topk] li').first();
    await first.waitFor({ timeout: 60_000 });
    assert.match(await first.innerText(), /tabby/i);
    assert.equal(await page.locator('[data-testid=try-timings] tbody tr').count(), 1);
    a11y['try'] = await seriousViolations(page);
  });

  it('Try it: scene_soccer.jpg on the detector draws boxes labelled person and sports ball', async () => {
    await page.selectOption('#try-model', 'detector');
    await page.setInputFiles('#try-file', join(IMAGES, 'scene_soccer.jpg'));
    const list = page.locator('[data-testid=detections]');
    await list.waitFor({ timeout: 60_000 });
    await page.waitForFunction(
      "document.querySelector('[data-testid=boxes]')?.getAttribute('data-drawn') != null",
    );
    const labels = await list.locator('li strong').allInnerTexts();
    assert.ok(labels.includes('person'), labels.join(', '));
    assert.ok(labels.includes('sports ball'), labels.join(', '));
    assert.ok(Number(await page.locator('[data-testid=boxes]').getAttribute('data-drawn')) >= 2);
    // It shows a photo from ../shared, which is never committed: always a temp file.
    await page.screenshot({ path: join(tmpdir(), 'vs-console-try-detector.png'), fullPage: true });
  });

  it('Traffic: the charts move after traffic is sent', async () => {
    await page.goto(`${h.rest}/console/#traffic`);
    await page.waitForFunction(
      "Number(document.querySelector('[data-testid=traffic-status]')?.getAttribute('data-samples') ?? 0) >= 1",
    );
    const points = async (): Promise<number> =>
      Number((await page.locator('#chart-rate').getAttribute('data-points')) ?? 0);
    const before = await points();
    const input = {
      dtype: 'float32' as const,
      shape: [1, 3, 224, 224],
      data: new Float32Array(3 * 224 * 224),
    };
    // Watch for a sample showing the traffic while it is being sent.
    const seen = page.waitForFunction(
      `[...document.querySelectorAll('[data-testid=traffic-table] tbody tr')].some(
        (tr) => tr.children[0]?.textContent === 'mobilenet' && tr.children[1]?.textContent === 'tfs-grpc' &&
          Number(tr.children[2]?.textContent) > 0)`,
      undefined,
      { timeout: 30_000 },
    );
    const until = Date.now() + 3500;
    while (Date.now() < until) await grpcPredict(h.grpc, 'mobilenet', { input });
    await seen.catch(async (error: unknown) => {
      const rows = await page.evaluate<string[][]>(
        "[...document.querySelectorAll('[data-testid=traffic-table] tbody tr')].map((r) => [...r.children].map((td) => td.textContent))",
      );
      throw new Error(`no traffic shown: ${JSON.stringify(rows)}: ${String(error)}`);
    });
    // uPlot draws on a canvas: one per chart, and the rate chart holds more points than before.
    assert.equal(await page.locator('#chart-rate canvas').count(), 1);
    assert.ok((await points()) > before, 'the request-rate chart gained points');
    a11y['traffic'] = await seriousViolations(page);
    await page.screenshot({ path: join(shots, 'console-traffic.png'), fullPage: true });
  });

  it('REST vs gRPC shows three timings (TF REST JSON, KServe binary, gRPC-web)', async () => {
    await page.goto(`${h.rest}/console/#compare`);
    await page.selectOption('#compare-model', 'mobilenet');
    await page.fill('#compare-runs', '3');
    await page.click('#compare-run');
    const rows = page.locator('[data-testid=compare-table] tbody tr');
    await rows.first().waitFor({ timeout: 120_000 });
    const cells = await page.evaluate<string[][]>(
      "[...document.querySelectorAll('[data-testid=compare-table] tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent ?? ''))",
    );
    assert.equal(cells.length, 3);
    assert.deepEqual(
      cells.map((c) => c[0]),
      ['TF Serving REST (JSON)', 'KServe v2 (binary HTTP)', 'TF Serving gRPC (gRPC-web)'],
    );
    for (const c of cells) {
      assert.match(c[1]!, /^[0-9.]+ ms$/, `latency of ${c[0]}`);
      assert.match(c[2]!, /[0-9]/, `request size of ${c[0]}`);
    }
    a11y['compare'] = await seriousViolations(page);
    await page.screenshot({ path: join(shots, 'console-compare.png'), fullPage: true });
  });

  it('Manage lists the models (load / unload / reload through gRPC-web)', async () => {
    await page.goto(`${h.rest}/console/#manage`);
    await page.getByRole('button', { name: 'Reload mobilenet' }).click();
    await page.waitForFunction(
      "/done/.test(document.getElementById('manage-status')?.textContent ?? '')",
      undefined,
      {
        timeout: 60_000,
      },
    );
    // The status stays after the list is refreshed in place (it used to be re-rendered away
    // within milliseconds, so that a busy browser could miss it).
    await page.getByRole('button', { name: 'Reload detector' }).waitFor();
    assert.equal(await page.locator('#manage-status').textContent(), 'Reloading mobilenet: done.');
    a11y['manage'] = await seriousViolations(page);
  });

  it('axe finds no serious or critical accessibility violation on any page', () => {
    assert.deepEqual(Object.keys(a11y).sort(), ['compare', 'manage', 'models', 'traffic', 'try']);
    const found = Object.entries(a11y).flatMap(([view, vs]) =>
      vs.map(
        (v) =>
          `${view}: ${v.id} (${v.impact}) ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join('; ')}`,
      ),
    );
    assert.deepEqual(found, []);
  });
});

describe('console Live view with a fake camera (Chromium)', { skip }, () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;

  before(async () => {
    const root = await tempRepo();
    await placeDetector(root);
    h = await startHarness({
      modelName: 'detector',
      modelBasePath: join(root, 'detector'),
      fileSystemPollSeconds: 0,
    });
    // Chromium's fake camera plays a Motion JPEG file: JPEG frames one after the other (its
    // reader takes even-sized baseline frames: the photo is scaled to 640×480 first).
    const frame = await sharp(readFileSync(join(IMAGES, 'scene_soccer.jpg')))
      .resize(640, 480, { fit: 'fill' })
      .jpeg({ quality: 90 })
      .toBuffer();
    const clip = join(await mkdtemp(join(tmpdir(), 'vs-live-')), 'soccer.mjpeg');
    await writeFile(clip, Buffer.concat(Array<Buffer>(10).fill(frame)));
    browser = await chromium.launch({
      executablePath: (browserBinary as { path: string }).path,
      args: [
        '--no-sandbox',
        '--disable-dev-shm-usage',
        '--disable-gpu',
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
        `--use-file-for-fake-video-capture=${clip}`,
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
    page = await context.newPage();
  });
  after(async () => {
    await browser?.close();
    await h?.close();
  });

  it('sends the camera over the frame stream and draws the persons and the ball with frames/s and latency', async () => {
    await page.goto(`${h.rest}/console/#live`);
    await page.selectOption('#live-model', 'detector');
    await page.getByRole('button', { name: 'Start camera' }).click();
    await page.waitForFunction(
      "Number(document.querySelector('[data-testid=live-canvas]')?.dataset.boxes ?? 0) > 0 && /person/.test(document.getElementById('live-labels')?.textContent ?? '')",
      undefined,
      { timeout: 60_000 },
    );
    const labels = await page.locator('#live-labels').innerText();
    assert.match(labels, /person/);
    assert.match(labels, /sports ball/);
    await page.waitForFunction(
      "/answered/.test(document.getElementById('live-stats')?.textContent ?? '') && Number(/(\\d+) answered/.exec(document.getElementById('live-stats').textContent)[1]) >= 3",
      undefined,
      { timeout: 60_000 },
    );
    const stats = await page.locator('#live-stats').innerText();
    assert.match(stats, /^\d+\.\d frames\/s · latency \d+(\.\d+)? ms · \d+ dropped · \d+ answered$/);
    await page.getByRole('button', { name: 'Stop' }).click();
    assert.equal(await page.locator('#live-stats').innerText(), 'Stopped.');
  });
});
