import { deflate, gzip } from 'node:zlib';
import type { ContentEncoding } from './http-api.js';

/**
 * The response encoding an `Accept-Encoding` header asks for among `supported`: the
 * client's listed order, skipping `q=0`; undefined for identity (no header, `*` alone or
 * nothing supported).
 */
export function negotiateEncoding(
  acceptEncoding: string | undefined,
  supported: readonly ContentEncoding[],
): ContentEncoding | undefined {
  if (acceptEncoding === undefined) return undefined;
  for (const part of acceptEncoding.split(',')) {
    const [token = '', ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    const refused = params.some((p) => /^q=0(\.0*)?$/.test(p));
    if (refused) continue;
    const found = supported.find((e) => e === token);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Compresses a response body off the event loop's critical path (libuv thread pool). */
export function compressBody(body: Uint8Array, encoding: ContentEncoding): Promise<Buffer> {
  const compress = encoding === 'gzip' ? gzip : deflate;
  return new Promise((resolve, reject) => {
    compress(body, (error, out) => {
      if (error) reject(error);
      else resolve(out);
    });
  });
}
