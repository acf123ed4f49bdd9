/**
 * The HPACK decoder of one HTTP/2 connection (RFC 7541): the static table, a dynamic table
 * in a ring of slots (grown by doubling), literal strings raw or Huffman-coded. An indexed field
 * costs no allocation: its name and value are the strings kept in the table.
 */
import { HeaderListTooLargeError, HpackError } from './hpack-errors.js';
import { decodeHuffman } from './hpack-huffman.js';
import { STATIC_NAMES, STATIC_TABLE_LENGTH, STATIC_VALUES } from './hpack-static-table.js';
import { latin1String } from './latin1-string.js';

export interface HpackDecoderOptions {
  /**
   * Dynamic table limit we advertise (SETTINGS_HEADER_TABLE_SIZE), bytes. Default 4096. Below
   * 4096 (the protocol's initial value) the peer may use 4096 bytes until it has our SETTINGS:
   * the decoder allows that until settingsAcknowledged() is called.
   */
  readonly maxTableBytes?: number;
  /** Largest header list (sum of name + value + 32 per field, RFC 7540 §6.5.2), bytes. Default 65536. */
  readonly maxHeaderListBytes?: number;
}

export interface HpackDecoder {
  /**
   * Decodes one complete header block (a HEADERS payload plus its CONTINUATIONs, padding and
   * priority removed) and calls onHeader for each field in order. Throws HpackError on malformed
   * input, HeaderListTooLargeError (after decoding the whole block) when the list is too large.
   *
   * Names and values are latin1 strings, one code unit per byte, exactly as sent. The decoder
   * checks HPACK only: HTTP/2 rules on the fields themselves (lowercase token names,
   * pseudo-headers first, no connection-specific fields, no NUL/CR/LF in values and no SP/HTAB
   * at their ends; RFC 9113 §8.2-8.3) are the transport's to enforce. (node:http2 resets a
   * stream for an uppercase name but silently drops a field whose value breaks those rules.) When the block throws, onHeader may already have seen a prefix of
   * its fields (for a list that is too large: the fields up to the limit): discard them. After
   * an HpackError, or an exception thrown by onHeader (which propagates), the dynamic table is
   * out of step with the peer's and the decoder must not be used again.
   */
  decode(block: Uint8Array, onHeader: (name: string, value: string) => void): void;
  /**
   * Call when the peer acknowledges the SETTINGS frame that advertised maxTableBytes. From then
   * on size updates above maxTableBytes are errors, and where the table limit was above it the
   * peer's next header block must start with a size update that brings it down (RFC 7541 §4.2).
   * A no-op when maxTableBytes >= 4096.
   */
  settingsAcknowledged(): void;
  /** The dynamic table now, newest entry first (RFC 7541 Appendix C lists it so), and its size in bytes. */
  dynamicTable(): DynamicTableSnapshot;
}

export interface DynamicTableSnapshot {
  readonly entries: readonly (readonly [name: string, value: string])[];
  /** Sum of name + value + 32 over the entries (RFC 7541 §4.1). */
  readonly bytes: number;
}

/** SETTINGS_HEADER_TABLE_SIZE before the peer has ours (RFC 7540 §6.5.2), bytes. */
const INITIAL_TABLE_BYTES = 4096;
/** Bytes an entry takes in the dynamic table beyond its name and value (RFC 7541 §4.1). */
const ENTRY_OVERHEAD = 32;
/** Largest integer accepted in any HPACK integer field. */
const MAX_INTEGER = 0x7fffffff;
/** Dynamic table slots a decoder starts with: 64 entries hold a 4 KiB table of 64-byte fields. */
const INITIAL_SLOTS = 64;

export function createHpackDecoder(options: HpackDecoderOptions = {}): HpackDecoder {
  const maxTableBytes = options.maxTableBytes ?? 4096;
  const maxHeaderListBytes = options.maxHeaderListBytes ?? 65536;
  if (!Number.isSafeInteger(maxTableBytes) || maxTableBytes < 0 || maxTableBytes > MAX_INTEGER) {
    throw new RangeError(`maxTableBytes must be an integer from 0 to ${MAX_INTEGER}, got ${maxTableBytes}`);
  }
  if (!Number.isSafeInteger(maxHeaderListBytes) || maxHeaderListBytes < 0) {
    throw new RangeError(`maxHeaderListBytes must be a non-negative integer, got ${maxHeaderListBytes}`);
  }
  return new Decoder(maxTableBytes, maxHeaderListBytes);
}

class Decoder implements HpackDecoder {
  /** Ring of dynamic entries; the newest is at `newest`, older ones at lower slots (mod size). */
  private names: string[];
  private values: string[];
  private mask: number;
  private newest = 0;
  private count = 0;
  /** Bytes the dynamic entries take (RFC 7541 §4.1). */
  private tableBytes = 0;
  /**
   * Current dynamic table limit (<= allowed except while updateRequired). Never below the peer
   * encoder's own limit: a larger one is safe (the peer never refers to entries it has evicted),
   * a smaller one would not be.
   */
  private limit: number;
  /** Largest size update accepted now: max(maxTableBytes, 4096) until our SETTINGS are acknowledged. */
  private allowed: number;
  /** Set when our SETTINGS lowered the limit: the next block must start with a size update. */
  private updateRequired = false;
  /** Read position after the last integer or string read by the slow paths. */
  private pos = 0;

  constructor(
    private readonly maxTableBytes: number,
    private readonly maxHeaderListBytes: number,
  ) {
    this.allowed = Math.max(maxTableBytes, INITIAL_TABLE_BYTES);
    this.limit = this.allowed;
    // A power-of-two slot count; doubled when full (at most limit / 32 entries ever fit).
    this.names = new Array<string>(INITIAL_SLOTS).fill('');
    this.values = new Array<string>(INITIAL_SLOTS).fill('');
    this.mask = INITIAL_SLOTS - 1;
  }

  decode(block: Uint8Array, onHeader: (name: string, value: string) => void): void {
    const end = block.length;
    let pos = 0;
    let listBytes = 0;
    let fields = 0;
    if (this.updateRequired && end > 0 && (block[0]! & 0xe0) !== 0x20) {
      throw new HpackError(
        `header block does not start with the dynamic table size update our SETTINGS_HEADER_TABLE_SIZE of ${this.maxTableBytes} requires`,
      );
    }
    while (pos < end) {
      const first = block[pos++]!;
      let name: string;
      let value: string;
      if (first >= 0x80) {
        // Indexed header field (§6.1), 7-bit prefix.
        let index = first & 0x7f;
        if (index === 0x7f) {
          index = this.readIntegerTail(block, pos, index);
          pos = this.pos;
        }
        if (index === 0) throw new HpackError('indexed header field with index 0');
        if (index <= STATIC_TABLE_LENGTH) {
          name = STATIC_NAMES[index]!;
          value = STATIC_VALUES[index]!;
        } else {
          const back = index - STATIC_TABLE_LENGTH - 1;
          if (back >= this.count) throw new HpackError(`header index ${index} is beyond the tables`);
          const slot = (this.newest - back) & this.mask;
          name = this.names[slot]!;
          value = this.values[slot]!;
        }
      } else if (first >= 0x20 && first < 0x40) {
        // Dynamic table size update (§6.3), 5-bit prefix: only before the block's first field.
        let size = first & 0x1f;
        if (size === 0x1f) {
          size = this.readIntegerTail(block, pos, size);
          pos = this.pos;
        }
        if (fields !== 0) throw new HpackError('dynamic table size update after the first header field');
        if (size > this.allowed) {
          throw new HpackError(
            `dynamic table size update to ${size} bytes exceeds the ${this.allowed} allowed`,
          );
        }
        this.updateRequired = false;
        this.limit = size;
        this.evictTo(size);
        continue;
      } else {
        // Literal header field (§6.2): with incremental indexing (01, 6-bit index prefix),
        // without indexing (0000) or never indexed (0001), both with a 4-bit prefix.
        const indexing = first >= 0x40;
        const prefixMask = indexing ? 0x3f : 0x0f;
        let index = first & prefixMask;
        if (index === prefixMask) {
          index = this.readIntegerTail(block, pos, index);
          pos = this.pos;
        }
        if (index === 0) {
          name = this.readString(block, pos);
          pos = this.pos;
        } else if (index <= STATIC_TABLE_LENGTH) {
          name = STATIC_NAMES[index]!;
        } else {
          const back = index - STATIC_TABLE_LENGTH - 1;
          if (back >= this.count) throw new HpackError(`header name index ${index} is beyond the tables`);
          name = this.names[(this.newest - back) & this.mask]!;
        }
        value = this.readString(block, pos);
        pos = this.pos;
        if (indexing) this.insert(name, value);
      }
      fields++;
      // Past the limit the rest of the block is still decoded (to keep the table in step)
      // but no more fields are handed out.
      if (listBytes <= this.maxHeaderListBytes) {
        listBytes += name.length + value.length + ENTRY_OVERHEAD;
        if (listBytes <= this.maxHeaderListBytes) onHeader(name, value);
      }
    }
    if (listBytes > this.maxHeaderListBytes) {
      throw new HeaderListTooLargeError(`header list exceeds ${this.maxHeaderListBytes} bytes`);
    }
  }

  /**
   * The rest of an integer whose prefix bits were all ones (§5.1): `prefix` is the prefix
   * value, `pos` the first continuation byte. Leaves the position after it in this.pos.
   */
  private readIntegerTail(block: Uint8Array, pos: number, prefix: number): number {
    let value = prefix;
    let scale = 1;
    for (;;) {
      if (pos >= block.length) throw new HpackError('header block ends inside an integer');
      const byte = block[pos++]!;
      value += (byte & 0x7f) * scale;
      if (value > MAX_INTEGER) throw new HpackError('integer in header block exceeds 2^31-1');
      if (byte < 0x80) break;
      scale *= 128;
      // Zero continuation bytes keep the value small but cannot reach past 2^31 either.
      if (scale > MAX_INTEGER) throw new HpackError('integer in header block exceeds 2^31-1');
    }
    this.pos = pos;
    return value;
  }

  /** A string literal (§5.2) starting at `pos`; leaves the position after it in this.pos. */
  private readString(block: Uint8Array, pos: number): string {
    if (pos >= block.length) throw new HpackError('header block ends before a string');
    const first = block[pos++]!;
    let length = first & 0x7f;
    if (length === 0x7f) {
      length = this.readIntegerTail(block, pos, length);
      pos = this.pos;
    }
    const end = pos + length;
    if (end > block.length) throw new HpackError('header block ends inside a string');
    this.pos = end;
    return first >= 0x80 ? decodeHuffman(block, pos, end) : latin1String(block, pos, end);
  }

  settingsAcknowledged(): void {
    if (this.allowed === this.maxTableBytes) return;
    this.allowed = this.maxTableBytes;
    if (this.limit > this.maxTableBytes) this.updateRequired = true;
  }

  /** Adds an entry as the newest, evicting the oldest ones to make room (§4.4). */
  private insert(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    if (size > this.limit) {
      this.evictTo(0);
      return;
    }
    this.evictTo(this.limit - size);
    if (this.count > this.mask) this.grow();
    this.newest = (this.newest + 1) & this.mask;
    this.names[this.newest] = name;
    this.values[this.newest] = value;
    this.count++;
    this.tableBytes += size;
  }

  /** Doubles the ring, keeping the entries' order. */
  private grow(): void {
    const slots = (this.mask + 1) * 2;
    const names = new Array<string>(slots).fill('');
    const values = new Array<string>(slots).fill('');
    for (let back = 0; back < this.count; back++) {
      const from = (this.newest - back) & this.mask;
      names[this.count - 1 - back] = this.names[from]!;
      values[this.count - 1 - back] = this.values[from]!;
    }
    this.names = names;
    this.values = values;
    this.newest = this.count - 1;
    this.mask = slots - 1;
  }

  /** Evicts the oldest entries until the table takes at most `bytes`. */
  private evictTo(bytes: number): void {
    while (this.tableBytes > bytes) {
      const slot = (this.newest - this.count + 1) & this.mask;
      const name = this.names[slot]!;
      const value = this.values[slot]!;
      this.tableBytes -= name.length + value.length + ENTRY_OVERHEAD;
      this.names[slot] = '';
      this.values[slot] = '';
      this.count--;
    }
  }

  dynamicTable(): DynamicTableSnapshot {
    const entries: (readonly [string, string])[] = [];
    for (let back = 0; back < this.count; back++) {
      const slot = (this.newest - back) & this.mask;
      entries.push([this.names[slot]!, this.values[slot]!]);
    }
    return { entries, bytes: this.tableBytes };
  }
}
