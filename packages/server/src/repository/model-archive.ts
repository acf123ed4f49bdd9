/**
 * Safe unpacking of model archives (`model.tar.gz`, as SageMaker hands models over): a
 * streaming tar reader (ustar, pax and GNU long names; gzip or not) that writes regular
 * files and directories only, below a fresh directory, within size and entry limits.
 */
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createGunzip } from 'node:zlib';
import { Code, ServingError } from '@visionserve/protocol';

export interface ArchiveLimits {
  /** Total bytes of the files unpacked (the uncompressed size), in bytes. */
  readonly maxBytes: number;
  /** Entries (files and directories). */
  readonly maxEntries: number;
}

export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = { maxBytes: 16 * 1024 ** 3, maxEntries: 100_000 };

/** What an unpacked archive held. */
export interface ArchiveSummary {
  readonly files: number;
  readonly directories: number;
  readonly bytes: number;
}

const BLOCK = 512;

function archiveError(archive: string, message: string): ServingError {
  return new ServingError(Code.INVALID_ARGUMENT, `model archive ${archive}: ${message}`);
}

/** Exact-size reads from a byte stream. */
class ByteReader {
  private buffered: Buffer[] = [];
  private size = 0;
  private done = false;

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  private async fill(n: number): Promise<boolean> {
    while (this.size < n && !this.done) {
      const next = await this.source.next();
      if (next.done === true) this.done = true;
      else {
        this.buffered.push(next.value);
        this.size += next.value.length;
      }
    }
    return this.size >= n;
  }

  /** Up to `max` bytes (at least 1 unless the stream ended). */
  async some(max: number): Promise<Buffer | undefined> {
    if (!(await this.fill(1))) return undefined;
    const first = this.buffered[0]!;
    const n = Math.min(max, first.length);
    const out = first.subarray(0, n);
    if (n === first.length) this.buffered.shift();
    else this.buffered[0] = first.subarray(n);
    this.size -= n;
    return out;
  }

  /** Exactly `n` bytes, or undefined when the stream ends first. */
  async exactly(n: number): Promise<Buffer | undefined> {
    if (!(await this.fill(n))) return undefined;
    const first = this.buffered[0]!;
    if (first.length >= n) {
      if (first.length === n) this.buffered.shift();
      else this.buffered[0] = first.subarray(n);
      this.size -= n;
      return first.subarray(0, n);
    }
    const all = Buffer.concat(this.buffered);
    this.buffered = all.length > n ? [all.subarray(n)] : [];
    this.size -= n;
    return all.subarray(0, n);
  }
}

function field(header: Buffer, from: number, length: number): string {
  const raw = header.subarray(from, from + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end < 0 ? raw.length : end).toString('utf8');
}

/** A numeric header field: octal text, or GNU base-256 when the high bit is set. */
function numberField(header: Buffer, from: number, length: number): number {
  const raw = header.subarray(from, from + length);
  if ((raw[0]! & 0x80) !== 0) {
    let value = 0;
    for (let i = 1; i < raw.length; i++) value = value * 256 + raw[i]!;
    return value;
  }
  const text = field(header, from, length).trim();
  return text === '' ? 0 : parseInt(text, 8);
}

function checksumOk(header: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
  return sum === numberField(header, 148, 8);
}

/** pax extended header records: "<len> <key>=<value>\n". */
function parsePax(data: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let pos = 0;
  while (pos < data.length) {
    const space = data.indexOf(0x20, pos);
    if (space < 0) break;
    const len = Number(data.subarray(pos, space).toString());
    if (!Number.isInteger(len) || len <= 0) break;
    const record = data.subarray(space + 1, pos + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) out.set(record.slice(0, eq), record.slice(eq + 1));
    pos += len;
  }
  return out;
}

/**
 * The relative path an entry is written to, or undefined for the archive root (`./`).
 * Absolute paths, `..` segments, NUL and backslashes are refused.
 */
function safeRelativePath(archive: string, name: string): string | undefined {
  if (name.includes('\0') || name.includes('\\')) throw archiveError(archive, `refused entry name "${name}"`);
  if (name.startsWith('/')) throw archiveError(archive, `refused absolute path "${name}"`);
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw archiveError(archive, `refused path "${name}" (it leaves the archive)`);
  return parts.length === 0 ? undefined : parts.join('/');
}

/** The decompressed bytes of an archive file: gunzipped when it starts with the gzip magic. */
async function* archiveBytes(path: string): AsyncGenerator<Buffer> {
  const head = await open(path, 'r');
  let gzip = false;
  try {
    const magic = Buffer.alloc(2);
    const { bytesRead } = await head.read(magic, 0, 2, 0);
    gzip = bytesRead === 2 && magic[0] === 0x1f && magic[1] === 0x8b;
  } finally {
    await head.close();
  }
  const file = createReadStream(path);
  const stream = gzip ? file.pipe(createGunzip()) : file;
  file.on('error', (e) => stream.destroy(e));
  try {
    for await (const chunk of stream) yield chunk as Buffer;
  } finally {
    file.destroy();
    stream.destroy();
  }
}

/**
 * Unpacks a tar or tar.gz archive into `dest` (which must not exist): first into a
 * sibling temporary directory, renamed into place only when the whole archive was read,
 * so `dest` is either complete or absent. Only regular files and directories are
 * written (mode 0644/0755, the owner's execute bit kept); symbolic and hard links,
 * devices and FIFOs refuse the whole archive, as do absolute paths, `..` segments, more
 * than `limits.maxEntries` entries or more than `limits.maxBytes` bytes of files, and a
 * truncated or corrupt archive. Failures are INVALID_ARGUMENT naming the archive.
 */
export async function extractModelArchive(
  archive: string,
  dest: string,
  limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS,
): Promise<ArchiveSummary> {
  const tmp = `${dest}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  await mkdir(tmp, { recursive: true });
  const summary = { files: 0, directories: 0, bytes: 0 };
  try {
    const reader = new ByteReader(archiveBytes(archive)[Symbol.asyncIterator]());
    let pax = new Map<string, string>();
    let longName: string | undefined;
    let entries = 0;
    for (;;) {
      const header = await reader.exactly(BLOCK);
      if (header === undefined) throw archiveError(archive, 'truncated (no end-of-archive marker)');
      if (header.every((b) => b === 0)) break;
      if (!checksumOk(header))
        throw archiveError(archive, 'corrupt header (checksum mismatch); not a tar archive?');
      const type = String.fromCharCode(header[156]!);
      const size = pax.has('size') ? Number(pax.get('size')) : numberField(header, 124, 12);
      if (!Number.isSafeInteger(size) || size < 0) throw archiveError(archive, 'corrupt entry size');
      const padded = Math.ceil(size / BLOCK) * BLOCK;
      const readAll = async (): Promise<Buffer> => {
        if (size > 1024 * 1024) throw archiveError(archive, 'extended header too large');
        const data = await reader.exactly(padded);
        if (data === undefined) throw archiveError(archive, 'truncated');
        return data.subarray(0, size);
      };
      if (type === 'x') {
        pax = parsePax(await readAll());
        continue;
      }
      if (type === 'g') {
        await readAll();
        continue;
      }
      if (type === 'L') {
        longName = (await readAll()).toString('utf8').replace(/\0+$/, '');
        continue;
      }
      if (type === 'K') {
        await readAll();
        continue;
      }
      const prefix = field(header, 345, 155);
      const rawName =
        pax.get('path') ??
        longName ??
        (prefix === '' ? field(header, 0, 100) : `${prefix}/${field(header, 0, 100)}`);
      pax = new Map();
      longName = undefined;
      if (type === '1' || type === '2') {
        throw archiveError(
          archive,
          `"${rawName}" is a ${type === '2' ? 'symbolic' : 'hard'} link; links are refused`,
        );
      }
      if (!['0', '\0', '5', '7'].includes(type)) {
        throw archiveError(
          archive,
          `"${rawName}" is not a regular file or directory (type "${type}"); refused`,
        );
      }
      const rel = safeRelativePath(archive, rawName);
      if (++entries > limits.maxEntries) {
        throw archiveError(archive, `more than ${limits.maxEntries} entries; refused`);
      }
      if (type === '5') {
        if (rel !== undefined) await mkdir(join(tmp, rel), { recursive: true });
        summary.directories++;
        continue;
      }
      if (rel === undefined) throw archiveError(archive, `refused entry name "${rawName}"`);
      summary.bytes += size;
      if (summary.bytes > limits.maxBytes) {
        throw archiveError(archive, `unpacks to more than ${limits.maxBytes} bytes; refused`);
      }
      const target = join(tmp, rel);
      await mkdir(dirname(target), { recursive: true });
      const executable = (numberField(header, 100, 8) & 0o100) !== 0;
      const out = await open(target, 'w', executable ? 0o755 : 0o644);
      try {
        let left = size;
        while (left > 0) {
          const chunk = await reader.some(left);
          if (chunk === undefined) throw archiveError(archive, `truncated inside "${rel}"`);
          await out.write(chunk);
          left -= chunk.length;
        }
      } finally {
        await out.close();
      }
      if (padded > size && (await reader.exactly(padded - size)) === undefined) {
        throw archiveError(archive, 'truncated');
      }
      summary.files++;
    }
    await rename(tmp, dest);
    return summary;
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    if (error instanceof ServingError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && (error as NodeJS.ErrnoException).path === archive) {
      throw new ServingError(Code.NOT_FOUND, `model archive ${archive} does not exist`);
    }
    throw archiveError(archive, `cannot be read (${error instanceof Error ? error.message : String(error)})`);
  }
}
