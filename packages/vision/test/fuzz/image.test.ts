/**
 * Fuzz target: the image decoding entry (`@visionserve/vision/image`, sharp) as the
 * SageMaker image path calls it: truncated, bit-flipped and garbage images of every accepted
 * format (JPEG, PNG, WebP, GIF, TIFF, AVIF), headers that declare huge sizes (decompression
 * bombs), extreme aspect ratios through every resize mode, and SVG/XML (refused).
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { crc32, deflateSync } from 'node:zlib';
import fc from 'fast-check';
import sharp from 'sharp';
import { Code, ServingError } from '@visionserve/protocol';
import { IMAGE_PRESETS, type ImageToTensorOptions } from '@visionserve/vision';
import { imageToTensor, sniffImageFormat } from '@visionserve/vision/image';
import { mutate, mutationArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, outcomeAsync, targetOptions } from '@visionserve/testkit/campaign';

/** A PNG whose header declares width x height RGB pixels but stores only a few rows of zeros. */
function pngDeclaring(width: number, height: number, rows: number): Buffer {
  const chunk = (type: string, data: Buffer): Buffer => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, 'latin1');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
    return Buffer.concat([head, data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width >>> 0, 0);
  ihdr.writeUInt32BE(height >>> 0, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  const rowBytes = Math.min(1 + 3 * width, 1 << 20);
  const idat = deflateSync(Buffer.alloc(rowBytes * Math.max(1, rows)), { level: 9 });
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Sets the frame size in a baseline JPEG's SOF0 segment. */
function jpegDeclaring(jpeg: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(jpeg);
  for (let i = 2; i + 9 < out.length; i++) {
    if (out[i] === 0xff && (out[i + 1] === 0xc0 || out[i + 1] === 0xc2)) {
      out.writeUInt16BE(height & 0xffff, i + 5);
      out.writeUInt16BE(width & 0xffff, i + 7);
      break;
    }
  }
  return out;
}

/** A small SVG whose `<use>` references double `depth` times (2^depth rectangles to render). */
function svgUses(depth: number): Buffer {
  let defs = '<rect id="l0" width="1" height="1"/>';
  for (let i = 1; i <= depth; i++)
    defs += `<g id="l${i}"><use href="#l${i - 1}"/><use href="#l${i - 1}"/></g>`;
  return Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><defs>${defs}</defs><use href="#l${depth}"/></svg>`,
  );
}

/** Hostile SVG/XML: exponential `<use>`, entity expansion, external entities and files, huge sizes. */
const svgArb: fc.Arbitrary<Buffer> = fc.oneof(
  fc.integer({ min: 1, max: 40 }).map(svgUses),
  fc
    .constantFrom(
      '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">' +
        '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><svg xmlns="http://www.w3.org/2000/svg"><text>&c;</text></svg>',
      '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>' +
        '<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><text>&x;</text></svg>',
      '<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><image href="file:///etc/hostname"/></svg>',
      '<svg xmlns="http://www.w3.org/2000/svg" width="1000000" height="1000000"/>',
      '\uFEFF  <svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>',
    )
    .map((text) => Buffer.from(text)),
);

const OPTIONS: readonly ImageToTensorOptions[] = [
  IMAGE_PRESETS.imagenet,
  IMAGE_PRESETS.mnist,
  IMAGE_PRESETS.yolox,
  { ...IMAGE_PRESETS.tfod, maxInputPixels: 4_000_000 },
  { width: 32, height: 16, resize: 'crop', layout: 'NHWC', dtype: 'uint8' },
  { width: 7, height: 300, resize: 'letterbox', channels: 1 },
];

describe('fuzz: image decoding', () => {
  const valid: Buffer[] = [];

  before(async () => {
    const sizes: [number, number][] = [
      [1, 1],
      [17, 9],
      [64, 48],
      [1, 2000],
      [3000, 1],
    ];
    for (const [width, height] of sizes) {
      const base = sharp({ create: { width, height, channels: 3, background: { r: 200, g: 30, b: 90 } } });
      valid.push(await base.clone().png().toBuffer());
      valid.push(await base.clone().jpeg({ quality: 80 }).toBuffer());
      valid.push(await base.clone().webp().toBuffer());
      if (width * height < 10_000) valid.push(await base.clone().gif().toBuffer());
    }
    const small = sharp({ create: { width: 24, height: 16, channels: 3, background: '#36c' } });
    valid.push(await small.clone().tiff({ compression: 'deflate' }).toBuffer());
    valid.push(await small.clone().tiff({ compression: 'jpeg' }).toBuffer());
    valid.push(await small.clone().avif({ effort: 0 }).toBuffer());
    valid.push(await small.clone().png({ palette: true }).toBuffer());
    valid.push(await small.clone().jpeg({ progressive: true }).toBuffer());
    valid.push(await small.clone().webp({ lossless: true }).toBuffer());
    valid.push(
      await sharp({ create: { width: 20, height: 20, channels: 4, background: '#0f08' } })
        .png()
        .toBuffer(),
    );
    valid.push(
      await sharp({ create: { width: 20, height: 10, channels: 3, background: '#fff' } })
        .jpeg()
        .withMetadata({ orientation: 6 })
        .toBuffer(),
    );
  });

  it('regression: a 1x16777217 image through a centre crop is INVALID_ARGUMENT, not a foreign error', async () => {
    await assert.rejects(
      imageToTensor(pngDeclaring(1, 16_777_217, 1), IMAGE_PRESETS.imagenet),
      (e: unknown) =>
        e instanceof ServingError &&
        e.code === Code.INVALID_ARGUMENT &&
        /Unable to resize image of 1x16777217/.test(e.message),
    );
  });

  it('regression: an SVG is refused before it is rendered (nested <use> rendered for ~30 s of CPU)', async () => {
    const start = performance.now();
    for (const bytes of [
      svgUses(29),
      Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'),
    ]) {
      await assert.rejects(
        imageToTensor(bytes, IMAGE_PRESETS.imagenet),
        (e: unknown) =>
          e instanceof ServingError &&
          e.code === Code.INVALID_ARGUMENT &&
          /not a JPEG, PNG, WebP, GIF, TIFF or AVIF\/HEIF image \(SVG and other XML are not accepted\)/.test(
            e.message,
          ),
      );
    }
    assert.ok(performance.now() - start < 1000);
  });

  it('every seed is sniffed as its format and decodes', async () => {
    for (const bytes of valid) {
      assert.notEqual(sniffImageFormat(bytes), undefined);
      await imageToTensor(bytes, IMAGE_PRESETS.mnist);
    }
  });

  it(
    'image/hostile: any bytes decode into the configured tensor or fail with INVALID_ARGUMENT, quickly and within memory',
    targetOptions('image/hostile'),
    async (t) => {
      const startRss = process.memoryUsage.rss();
      let peakRss = startRss;
      let slowestMs = 0;
      const imageArb = fc.oneof(
        { weight: 2, arbitrary: fc.nat().map((i) => valid[i % valid.length]!) },
        {
          weight: 6,
          arbitrary: fc
            .tuple(fc.nat(), fc.array(mutationArb, { minLength: 1, maxLength: 4 }))
            .map(([i, edits]) => Buffer.from(mutate(valid[i % valid.length]!, edits))),
        },
        {
          weight: 2,
          arbitrary: fc
            .tuple(
              fc.integer({ min: 1, max: 2 ** 31 - 1 }),
              fc.integer({ min: 1, max: 2 ** 31 - 1 }),
              fc.integer({ min: 0, max: 16 }),
            )
            .map(([w, h, rows]) => pngDeclaring(w, h, rows)),
        },
        {
          weight: 1,
          arbitrary: fc
            .tuple(fc.nat(), fc.integer({ min: 0, max: 65535 }), fc.integer({ min: 0, max: 65535 }))
            .map(([i, w, h]) => jpegDeclaring(valid[(i % 5) * 4 + 1] ?? valid[1]!, w, h)),
        },
        { weight: 1, arbitrary: fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)) },
        { weight: 1, arbitrary: svgArb },
      );
      await fuzzAsync(
        t,
        'image/hostile',
        fc.asyncProperty(
          imageArb,
          fc.nat(),
          fc.integer({ min: 1, max: 50_000_000 }),
          async (bytes, which, limit) => {
            const base = OPTIONS[which % OPTIONS.length]!;
            const options = which % 7 === 0 ? { ...base, maxInputPixels: limit } : base;
            const start = performance.now();
            const result = await outcomeAsync(
              () => imageToTensor(bytes, options),
              [Code.INVALID_ARGUMENT],
              20_000,
            );
            slowestMs = Math.max(slowestMs, performance.now() - start);
            peakRss = Math.max(peakRss, process.memoryUsage.rss());
            if (peakRss - startRss > 1024 * 1024 * 1024)
              throw new Error(`RSS grew by ${(peakRss - startRss) >> 20} MiB`);
            if (!result.ok) return;
            if (sniffImageFormat(bytes) === undefined) throw new Error('decoded bytes of no accepted format');
            const { tensor, originalWidth, originalHeight } = result.value;
            const channels = options.channels ?? 3;
            const w = options.width ?? originalWidth;
            const h = options.height ?? originalHeight;
            const expected =
              (options.layout ?? 'NHWC') === 'NCHW' ? [1, channels, h, w] : [1, h, w, channels];
            if (tensor.shape.join(',') !== expected.join(','))
              throw new Error(`shape [${tensor.shape.join(',')}], expected [${expected.join(',')}]`);
            if (tensor.data.length !== channels * w * h) throw new Error(`${tensor.data.length} elements`);
            if (tensor.dtype !== (options.dtype ?? 'float32')) throw new Error(`dtype ${tensor.dtype}`);
          },
        ),
        150,
        () =>
          `; peak RSS +${Math.max(0, (peakRss - startRss) >> 20)} MiB, slowest input ${slowestMs.toFixed(0)} ms`,
        false,
      );
    },
  );
});
