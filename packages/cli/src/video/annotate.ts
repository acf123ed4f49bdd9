/**
 * Draws a frame's results on its pixels: labelled boxes for detections (coloured by track,
 * or by class without tracking), the top classes for a classifier. The overlay is one SVG
 * composited by sharp (libvips, off the event loop).
 */
import sharp from 'sharp';
import type { RgbFrame } from './ppm-reader.js';

interface DrawnDetection {
  readonly class_id?: number;
  readonly label?: string;
  readonly score?: number;
  readonly track_id?: number;
  readonly box?: { ymin: number; xmin: number; ymax: number; xmax: number };
}

const PALETTE = [
  '#e6194b',
  '#3cb44b',
  '#ffe119',
  '#4363d8',
  '#f58231',
  '#911eb4',
  '#46f0f0',
  '#f032e6',
  '#bcf60c',
  '#fabebe',
  '#008080',
  '#e6beff',
  '#9a6324',
  '#fffac8',
  '#800000',
  '#aaffc3',
];

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function detectionSvg(d: DrawnDetection, width: number, height: number, font: number): string {
  const b = d.box!;
  const x = b.xmin * width;
  const y = b.ymin * height;
  const w = Math.max(1, (b.xmax - b.xmin) * width);
  const h = Math.max(1, (b.ymax - b.ymin) * height);
  const colour = PALETTE[(d.track_id ?? d.class_id ?? 0) % PALETTE.length]!;
  const text = escapeXml(
    `${d.label ?? `class ${d.class_id ?? '?'}`}${d.track_id === undefined ? '' : ` #${d.track_id}`}` +
      (d.score === undefined ? '' : ` ${d.score.toFixed(2)}`),
  );
  const ty = y >= font + 4 ? y - 4 : y + h + font;
  const stroke = Math.max(2, Math.round(font / 6));
  return (
    `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" fill="none" stroke="${colour}" stroke-width="${stroke}"/>` +
    `<text x="${x.toFixed(1)}" y="${ty.toFixed(1)}" font-size="${font}" fill="${colour}" stroke="black" stroke-width="${(font / 8).toFixed(1)}" paint-order="stroke">${text}</text>`
  );
}

interface ClassScore {
  readonly label?: string;
  readonly class_id?: number;
  readonly score?: number;
}

/** The SVG overlay for one /invocations answer (detections or top-k classes); empty when there is nothing to draw. */
export function overlaySvg(answer: unknown, width: number, height: number): string {
  const font = Math.max(12, Math.round(Math.min(width, height) / 30));
  const prediction = (answer as { predictions?: unknown[] } | undefined)?.predictions?.[0];
  let body = '';
  if (Array.isArray(prediction)) {
    (prediction as ClassScore[]).slice(0, 3).forEach((c, i) => {
      const text = escapeXml(`${c.label ?? `class ${c.class_id}`} ${c.score?.toFixed(2) ?? ''}`);
      body += `<text x="8" y="${(font + 6) * (i + 1)}" font-size="${font}" fill="white" stroke="black" stroke-width="${(font / 8).toFixed(1)}" paint-order="stroke">${text}</text>`;
    });
  } else {
    const detections = (prediction as { detections?: DrawnDetection[] } | undefined)?.detections ?? [];
    for (const d of detections) if (d.box !== undefined) body += detectionSvg(d, width, height, font);
  }
  if (body === '') return '';
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="DejaVu Sans, sans-serif">${body}</svg>`;
}

/** The frame's RGB pixels with the answer drawn on them. */
export async function annotateFrame(frame: RgbFrame, answer: unknown): Promise<Buffer> {
  const svg = overlaySvg(answer, frame.width, frame.height);
  if (svg === '') return frame.pixels;
  return sharp(frame.pixels, { raw: { width: frame.width, height: frame.height, channels: 3 } })
    .composite([{ input: Buffer.from(svg), top: 0, left: 0 }])
    .removeAlpha()
    .raw()
    .toBuffer();
}

/** The frame as a JPEG, as a camera client would send it. */
export function encodeJpeg(frame: RgbFrame, quality = 90): Promise<Buffer> {
  return sharp(frame.pixels, { raw: { width: frame.width, height: frame.height, channels: 3 } })
    .jpeg({ quality })
    .toBuffer();
}
