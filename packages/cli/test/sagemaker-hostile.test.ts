import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { image } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { placeMobilenet, request } from './helpers/sagemaker-models.js';

/**
 * A tiny PNG whose header declares width x height RGB pixels (a decompression
 * bomb): only 16 rows of zeros are actually stored, a few KB compressed.
 */
function pngBomb(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer): Buffer => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, 'latin1');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
    return Buffer.concat([head, data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type RGB
  const row = Buffer.alloc(1 + 3 * width);
  const idat = deflateSync(Buffer.concat(Array.from({ length: 16 }, () => row)), { level: 9 });
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

interface Upload {
  status: number;
  body: string;
  /** Largest RSS of this process seen while the upload ran, in bytes. */
  peakRss: number;
}

/**
 * POSTs `totalBytes` of zeros, streamed from one reused 1 MiB chunk (the client
 * holds no more than that), with or without a declared Content-Length.
 */
function upload(url: string, totalBytes: number, declareLength: boolean): Promise<Upload> {
  return new Promise((resolve, reject) => {
    const chunk = Buffer.alloc(1024 * 1024);
    let peakRss = process.memoryUsage.rss();
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    }, 5);
    const u = new URL(url);
    const req = httpRequest({
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=half_plus_two',
        ...(declareLength ? { 'Content-Length': String(totalBytes) } : {}),
      },
    });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        clearInterval(sampler);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8'), peakRss });
      });
    });
    req.on('error', (error) => {
      // The server may close the socket while we still write; the response decides.
      if (!answered) {
        clearInterval(sampler);
        reject(error);
      }
    });
    let sent = 0;
    const pump = (): void => {
      while (sent < totalBytes && !answered && !req.destroyed) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered && !req.destroyed) req.end();
    };
    pump();
  });
}

/** Body limit of the server under test (the default is 100 MiB). */
const BODY_LIMIT = 16 * 1024 * 1024;

describe('SageMaker endpoint: hostile input', () => {
  let h: Harness;
  let url: string;
  const mobilenet = { 'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=mobilenet' };
  before(async () => {
    const root = await tempRepo('vs-sm-hostile-');
    await placeMobilenet(root);
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    await placeModel(root, 'broken', 1, new TextEncoder().encode('garbage'));
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'broken' base_path: 'broken' }
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'half_plus_two' base_path: 'half_plus_two' }
      }`,
    );
    h = await startHarness({
      modelConfigFile: config,
      // The broken model never loads; without this the server would refuse to start (as TF Serving).
      waitForModels: true,
      fileSystemPollSeconds: 0,
      sagemakerPort: 0,
      sagemakerDefaultModelName: 'broken',
      sagemakerMaxBodyBytes: BODY_LIMIT,
      instances: 1,
    });
    url = h.sagemaker;
  });
  after(async () => {
    await h.close();
  });

  it('/ping is 503 {"error"} while the default model has no AVAILABLE version', async () => {
    const ping = await request(`${url}/ping`);
    assert.equal(ping.status, 503);
    assert.match((ping.json() as { error: string }).error, /broken has no AVAILABLE version/);
  });

  it('truncated and non-image bytes sent as application/x-image are 400', async () => {
    const cat = image('cat_tabby.jpg');
    for (const body of [
      cat.subarray(0, Math.floor(cat.length * 0.6)),
      Buffer.from('definitely not an image'),
    ]) {
      const res = await request(`${url}/invocations`, {
        body,
        headers: { 'Content-Type': 'application/x-image', ...mobilenet },
      });
      assert.equal(res.status, 400, res.text);
      assert.match((res.json() as { error: string }).error, /Unable to decode image/);
    }
  });

  it('a PNG declaring 50000x50000 pixels is refused before decoding (400, memory bounded)', async () => {
    const bomb = pngBomb(50_000, 50_000);
    assert.ok(bomb.length < 64 * 1024, `bomb is ${bomb.length} bytes`);
    const before = process.memoryUsage.rss();
    const res = await request(`${url}/invocations`, {
      body: bomb,
      headers: { 'Content-Type': 'image/png', ...mobilenet },
    });
    assert.equal(res.status, 400, res.text);
    // sharp refuses it from the header (limitInputPixels); nothing is decoded.
    // What the user sees: the size, the limit and the setting that raises it.
    assert.match(
      (res.json() as { error: string }).error,
      /^Image of 50000x50000 pixels \(2500000000\) exceeds the limit of 40000000 pixels \(image.maxInputPixels in the model's visionserve.json\)$/,
    );
    assert.ok(process.memoryUsage.rss() - before < 100 * 1024 * 1024);
  });

  it('empty bodies are 400; deeply nested JSON is 400', async () => {
    for (const type of ['application/json', 'text/csv', 'application/x-image', 'application/jsonlines']) {
      const res = await request(`${url}/invocations`, {
        body: '',
        headers: { 'Content-Type': type, ...mobilenet },
      });
      assert.equal(res.status, 400, `${type}: ${res.text}`);
      assert.deepEqual(res.json(), { error: 'Empty request body' });
    }
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    const res = await request(`${url}/invocations`, {
      body: deep,
      headers: {
        'Content-Type': 'application/json',
        'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=half_plus_two',
      },
    });
    assert.equal(res.status, 400);
  });

  it('a 200 MB body is 413 without being buffered (memory bounded by the limit), declared or chunked', async () => {
    for (const declareLength of [true, false]) {
      const before = process.memoryUsage.rss();
      const res = await upload(`${url}/invocations`, 200 * 1024 * 1024, declareLength);
      assert.equal(res.status, 413, res.body);
      assert.match((JSON.parse(res.body) as { error: string }).error, /exceeds the limit of 16777216 bytes/);
      const growth = res.peakRss - before;
      console.log(
        `200 MB upload (${declareLength ? 'Content-Length' : 'chunked'}): 413, peak RSS growth ${(growth / 1048576).toFixed(1)} MiB`,
      );
      // A declared length is refused before reading; a chunked body is read up to the limit, then discarded.
      assert.ok(growth < BODY_LIMIT + 24 * 1024 * 1024, `RSS grew by ${growth} bytes`);
    }
    const ok = await request(`${url}/invocations`, {
      body: '1',
      headers: {
        'Content-Type': 'application/json',
        'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=half_plus_two',
      },
    });
    assert.equal(ok.status, 200);
  });
});
