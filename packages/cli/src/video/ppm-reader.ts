/**
 * Splits ffmpeg's `-f image2pipe -c:v ppm` output into frames. Each frame is a binary PPM
 * (`P6 <width> <height> 255` then width×height×3 bytes of RGB), so the stream describes its
 * own frame size, and a source that changes resolution mid-stream is read correctly.
 */

export interface RgbFrame {
  readonly width: number;
  readonly height: number;
  /** width×height×3 bytes, RGB, rows top to bottom. */
  readonly pixels: Buffer;
}

/** Longest PPM header ffmpeg writes ("P6\n65535 65535\n255\n" is 19 bytes). */
const MAX_HEADER = 64;
const HEADER = /^P6\s+(\d+)\s+(\d+)\s+255\s/;

export class PpmReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private header: { width: number; height: number; length: number } | undefined;

  /** Takes a chunk of the stream; returns the frames it completed. */
  push(chunk: Buffer): RgbFrame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: RgbFrame[] = [];
    for (;;) {
      if (this.header === undefined && !this.readHeader()) break;
      const h = this.header!;
      if (this.buffered < h.length) break;
      frames.push({ width: h.width, height: h.height, pixels: this.take(h.length) });
      this.header = undefined;
    }
    return frames;
  }

  /** Bytes of an unfinished frame (a stream that ends with some is truncated). */
  get pending(): number {
    return this.buffered;
  }

  private readHeader(): boolean {
    if (this.buffered < 8) return false;
    const head = this.peek(Math.min(MAX_HEADER, this.buffered)).toString('latin1');
    const m = HEADER.exec(head);
    if (m === null) {
      if (this.buffered >= MAX_HEADER || !/^P6\s/.test(head.slice(0, 3))) {
        throw new Error('ffmpeg wrote something that is not a PPM frame');
      }
      return false;
    }
    const width = Number(m[1]);
    const height = Number(m[2]);
    if (width < 1 || height < 1) throw new Error(`ffmpeg wrote a ${width}x${height} frame`);
    this.take(m[0].length);
    this.header = { width, height, length: width * height * 3 };
    return true;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!.subarray(0, n);
  }

  /** The next n bytes, copied into their own memory (so the stream's chunks can be freed). */
  private take(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const chunk = this.chunks[0]!;
      const used = Math.min(chunk.length, n - at);
      chunk.copy(out, at, 0, used);
      at += used;
      if (used === chunk.length) this.chunks.shift();
      else this.chunks[0] = chunk.subarray(used);
    }
    this.buffered -= n;
    return out;
  }
}
