/**
 * `@visionserve/vision/image`: encoded image (JPEG, PNG, WebP, ...) -> model input tensor.
 *
 * This is the only module that uses **sharp**, an optional peer dependency (a native
 * module): install it yourself (`npm install sharp`) where images are decoded. sharp is
 * imported lazily, on the first call, so importing this module is cheap and works
 * without sharp; calls then reject with FAILED_PRECONDITION. The package's main entry
 * never imports this file.
 */
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import type { ImageToTensorOptions } from './image-options.js';

export type { ImageToTensorOptions } from './image-options.js';

export interface ImageTensor {
  /** Batch-1 tensor in the requested layout. */
  readonly tensor: Tensor;
  readonly originalWidth: number;
  readonly originalHeight: number;
  /** Size the image content has inside the tensor (smaller than the tensor for letterbox). */
  readonly contentWidth: number;
  readonly contentHeight: number;
}

/** The parts of sharp this helper uses (so that its types are not needed by users). */
interface SharpPipeline {
  metadata(): Promise<{ width?: number; height?: number; autoOrient?: { width: number; height: number } }>;
  autoOrient(): SharpPipeline;
  resize(width: number, height: number, options: Record<string, unknown>): SharpPipeline;
  extract(region: { left: number; top: number; width: number; height: number }): SharpPipeline;
  grayscale(): SharpPipeline;
  toColourspace(space: string): SharpPipeline;
  removeAlpha(): SharpPipeline;
  raw(): SharpPipeline;
  toBuffer(options: {
    resolveWithObject: true;
  }): Promise<{ data: Buffer; info: { width: number; height: number; channels: number } }>;
}
type SharpFactory = (input: Uint8Array, options: Record<string, unknown>) => SharpPipeline;

let sharpPromise: Promise<SharpFactory> | undefined;

/** Loads sharp once; FAILED_PRECONDITION with install advice when it is missing. */
function loadSharp(): Promise<SharpFactory> {
  sharpPromise ??= import('sharp').then(
    (module) => (module as unknown as { default: SharpFactory }).default,
    (error: unknown) => {
      sharpPromise = undefined;
      throw new ServingError(
        Code.FAILED_PRECONDITION,
        'Decoding images needs the optional native module "sharp": run `npm install sharp`',
        { cause: error },
      );
    },
  );
  return sharpPromise;
}

/** The raster formats that are decoded; everything else is refused before sharp sees it. */
export const ACCEPTED_IMAGE_FORMATS = ['jpeg', 'png', 'webp', 'gif', 'tiff', 'heif'] as const;
export type AcceptedImageFormat = (typeof ACCEPTED_IMAGE_FORMATS)[number];

function startsWith(bytes: Uint8Array, offset: number, signature: readonly number[] | string): boolean {
  const expected = typeof signature === 'string' ? Array.from(Buffer.from(signature, 'latin1')) : signature;
  if (bytes.length < offset + expected.length) return false;
  return expected.every((b, i) => bytes[offset + i] === b);
}

/**
 * The format an encoded image declares in its first bytes, or undefined for anything that
 * is not one of {@link ACCEPTED_IMAGE_FORMATS}. SVG in particular is refused: its
 * rendering cost has no bound in the pixel count (a 1 KB file of nested `<use>` elements
 * renders for half a minute).
 */
export function sniffImageFormat(bytes: Uint8Array): AcceptedImageFormat | undefined {
  if (startsWith(bytes, 0, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (startsWith(bytes, 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'png';
  if (startsWith(bytes, 0, 'GIF87a') || startsWith(bytes, 0, 'GIF89a')) return 'gif';
  if (startsWith(bytes, 0, 'RIFF') && startsWith(bytes, 8, 'WEBP')) return 'webp';
  // Classic and BigTIFF, little- and big-endian.
  if (startsWith(bytes, 0, [0x49, 0x49, 0x2a, 0x00]) || startsWith(bytes, 0, [0x4d, 0x4d, 0x00, 0x2a]))
    return 'tiff';
  if (startsWith(bytes, 0, [0x49, 0x49, 0x2b, 0x00]) || startsWith(bytes, 0, [0x4d, 0x4d, 0x00, 0x2b]))
    return 'tiff';
  // ISO base media file (AVIF, HEIC): a leading 'ftyp' box.
  if (startsWith(bytes, 4, 'ftyp')) return 'heif';
  return undefined;
}

/**
 * Decodes an encoded image and lays it out as a batch-1 tensor. Non-images, formats other
 * than {@link ACCEPTED_IMAGE_FORMATS}, truncated files and images above `maxInputPixels`
 * reject with INVALID_ARGUMENT.
 */
export async function imageToTensor(
  bytes: Uint8Array,
  options: ImageToTensorOptions = {},
): Promise<ImageTensor> {
  if (sniffImageFormat(bytes) === undefined) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      'Unable to decode image: not a JPEG, PNG, WebP, GIF, TIFF or AVIF/HEIF image' +
        (/^\s*</.test(new TextDecoder().decode(bytes.subarray(0, 64)))
          ? ' (SVG and other XML are not accepted)'
          : ''),
    );
  }
  const sharp = await loadSharp();
  const maxPixels = options.maxInputPixels ?? 40_000_000;
  const channels = options.channels ?? 3;
  let originalWidth: number;
  let originalHeight: number;
  try {
    // The header alone (no pixel limit yet, so that the error below can say the size).
    const meta = await sharp(bytes, { limitInputPixels: false, failOn: 'truncated' }).metadata();
    originalWidth = meta.autoOrient?.width ?? meta.width ?? 0;
    originalHeight = meta.autoOrient?.height ?? meta.height ?? 0;
  } catch (error) {
    throw new ServingError(Code.INVALID_ARGUMENT, `Unable to decode image: ${firstLine(error)}`);
  }
  if (!originalWidth || !originalHeight)
    throw new ServingError(Code.INVALID_ARGUMENT, 'Unable to decode image: unknown size');
  // The header is read; nothing is decoded yet (decompression bombs stop here).
  if (originalWidth * originalHeight > maxPixels) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      `Image of ${originalWidth}x${originalHeight} pixels (${originalWidth * originalHeight}) exceeds the limit of ` +
        `${maxPixels} pixels (image.maxInputPixels in the model's visionserve.json)`,
    );
  }
  let pipeline: SharpPipeline = sharp(bytes, {
    limitInputPixels: maxPixels,
    failOn: 'truncated',
    sequentialRead: true,
  });
  const width = options.width ?? options.height ?? originalWidth;
  const height = options.height ?? options.width ?? originalHeight;
  let contentWidth = width;
  let contentHeight = height;
  // sharp validates sizes when the pipeline is built: an extreme aspect ratio can ask a
  // centre crop for an intermediate side past its limit (a 1x16777217 PNG), which is the
  // client's image, not a fault.
  try {
    pipeline = pipeline.autoOrient();
    if (options.width !== undefined || options.height !== undefined) {
      const mode = options.resize ?? 'stretch';
      if (mode === 'stretch') {
        pipeline = pipeline.resize(width, height, { fit: 'fill', kernel: 'linear' });
      } else if (mode === 'crop') {
        const shorter = options.resizeShorter ?? Math.round((Math.max(width, height) * 256) / 224);
        const ratio = shorter / Math.min(originalWidth, originalHeight);
        const rw = Math.max(width, Math.round(originalWidth * ratio));
        const rh = Math.max(height, Math.round(originalHeight * ratio));
        pipeline = pipeline
          .resize(rw, rh, { fit: 'fill', kernel: 'linear' })
          .extract({ left: Math.floor((rw - width) / 2), top: Math.floor((rh - height) / 2), width, height });
      } else {
        const pad = options.padValue ?? 114;
        const r = Math.min(width / originalWidth, height / originalHeight);
        contentWidth = Math.round(originalWidth * r);
        contentHeight = Math.round(originalHeight * r);
        pipeline = pipeline.resize(width, height, {
          fit: 'contain',
          position: 'left top',
          background: { r: pad, g: pad, b: pad },
          kernel: 'linear',
        });
      }
    }
    pipeline =
      channels === 1
        ? pipeline.grayscale().toColourspace('b-w')
        : pipeline.removeAlpha().toColourspace('srgb');
  } catch (error) {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      `Unable to resize image of ${originalWidth}x${originalHeight} pixels: ${firstLine(error)}`,
    );
  }
  let raw: { data: Buffer; info: { width: number; height: number; channels: number } };
  try {
    raw = await pipeline.raw().toBuffer({ resolveWithObject: true });
  } catch (error) {
    throw new ServingError(Code.INVALID_ARGUMENT, `Unable to decode image: ${firstLine(error)}`);
  }
  if (raw.info.channels !== channels) {
    throw new ServingError(
      Code.INTERNAL,
      `Decoder produced ${raw.info.channels} channels, expected ${channels}`,
    );
  }
  return {
    tensor: layoutPixels(raw.data, raw.info.width, raw.info.height, channels, options),
    originalWidth,
    originalHeight,
    contentWidth,
    contentHeight,
  };
}

/** Interleaved 8-bit pixels (HWC) -> tensor per the options (layout, channel order, dtype, normalisation). */
export function layoutPixels(
  raw: Uint8Array,
  w: number,
  h: number,
  c: number,
  options: ImageToTensorOptions,
): Tensor {
  const nchw = (options.layout ?? 'NHWC') === 'NCHW';
  const bgr = (options.channelOrder ?? 'RGB') === 'BGR' && c === 3;
  const shape = nchw ? [1, c, h, w] : [1, h, w, c];
  const plane = w * h;
  if ((options.dtype ?? 'float32') === 'uint8') {
    const out = new Uint8Array(plane * c);
    if (!nchw && !bgr) {
      out.set(raw.subarray(0, plane * c));
    } else {
      for (let p = 0; p < plane; p++) {
        for (let k = 0; k < c; k++)
          out[nchw ? k * plane + p : p * c + k] = raw[p * c + (bgr ? c - 1 - k : k)]!;
      }
    }
    return { dtype: 'uint8', shape, data: out };
  }
  const scale = options.scale ?? 1 / 255;
  const mean = options.mean ?? [];
  const std = options.std ?? [];
  const out = new Float32Array(plane * c);
  for (let k = 0; k < c; k++) {
    const m = mean[k] ?? 0;
    const s = std[k] ?? 1;
    const src = bgr ? c - 1 - k : k;
    for (let p = 0; p < plane; p++)
      out[nchw ? k * plane + p : p * c + k] = (raw[p * c + src]! * scale - m) / s;
  }
  return { dtype: 'float32', shape, data: out };
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0] ?? message;
}
