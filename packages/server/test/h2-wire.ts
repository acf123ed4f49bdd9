/**
 * Raw HTTP/2 bytes for tests that talk to the gRPC server's own HTTP/2 transport over a plain
 * socket: frames, SETTINGS, 32-bit payloads and uncompressed HPACK header blocks.
 */

/** SETTINGS frame type (RFC 9113 §6.5). */
const SETTINGS = 0x4;

/** One frame; `declared` overrides the length field (for malformed-frame tests). */
export function frame(
  type: number,
  flags: number,
  stream: number,
  payload: Uint8Array = Buffer.alloc(0),
  declared?: number,
): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE((declared ?? payload.byteLength) & 0xffffff, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream >>> 0, 5);
  return Buffer.concat([head, payload]);
}

export function u32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value >>> 0, 0);
  return b;
}

/** A SETTINGS frame with these (id, value) entries. */
export function settings(entries: readonly (readonly [number, number])[]): Buffer {
  const payload = Buffer.alloc(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value >>> 0, i * 6 + 2);
  });
  return frame(SETTINGS, 0, 0, payload);
}

/** An HPACK integer with an n-bit prefix (RFC 7541 §5.1), first byte ORed with `high`. */
export function hpackInt(value: number, bits: number, high: number): number[] {
  const max = (1 << bits) - 1;
  if (value < max) return [high | value];
  const out = [high | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/** Header fields as literals without indexing, new names, no Huffman coding. */
export function hpack(fields: readonly (readonly [string, string])[]): Buffer {
  const out: number[] = [];
  for (const [name, value] of fields) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    out.push(0x00, ...hpackInt(n.length, 7, 0), ...n, ...hpackInt(v.length, 7, 0), ...v);
  }
  return Buffer.from(out);
}
