/**
 * Batch Transform's record handling, pure: splitting an input file into records
 * (`SplitType`), grouping them into requests (`BatchStrategy`, `MaxPayloadInMB`) and
 * assembling answers into the output (`AssembleWith`).
 */

export type SplitType = 'None' | 'Line';
export type BatchStrategy = 'SingleRecord' | 'MultiRecord';
export type AssembleWith = 'None' | 'Line';

/** One record: its bytes and where it came from (1-based line; 0 for a whole file). */
export interface TransformRecord {
  readonly data: Uint8Array;
  readonly line: number;
}

/** One request: consecutive records, `first` being the index of the first among the file's records. */
export interface MiniBatch {
  readonly index: number;
  readonly first: number;
  readonly records: readonly TransformRecord[];
  /** The request body: the records, joined with "\n" for several. */
  readonly body: Uint8Array;
}

/**
 * The records of a file. `None`: the whole file. `Line`: every non-empty line (LF or
 * CRLF), without its line ending; blank lines are not records (the server skips them too).
 */
export function splitRecords(data: Uint8Array, split: SplitType): TransformRecord[] {
  if (split === 'None') return [{ data, line: 0 }];
  const out: TransformRecord[] = [];
  let start = 0;
  let line = 1;
  const push = (end: number): void => {
    let e = end;
    if (e > start && data[e - 1] === 0x0d) e--;
    let blank = true;
    for (let i = start; i < e; i++) {
      const c = data[i]!;
      if (c !== 0x20 && c !== 0x09) {
        blank = false;
        break;
      }
    }
    if (!blank) out.push({ data: data.subarray(start, e), line });
  };
  for (let i = 0; i < data.length; i++) {
    if (data[i] === 0x0a) {
      push(i);
      start = i + 1;
      line++;
    }
  }
  if (start < data.length) push(data.length);
  return out;
}

const NEWLINE = new Uint8Array([0x0a]);

function join(records: readonly TransformRecord[]): Uint8Array {
  if (records.length === 1) return records[0]!.data;
  const parts: Uint8Array[] = [];
  records.forEach((r, i) => {
    if (i > 0) parts.push(NEWLINE);
    parts.push(r.data);
  });
  return Buffer.concat(parts);
}

/**
 * Requests for records `from` onwards. SingleRecord: one record each. MultiRecord: as
 * many consecutive records as fit in `maxPayloadBytes` (joined with "\n"; a record alone
 * over the limit still makes its own request, which then fails as too large).
 */
export function miniBatches(
  records: readonly TransformRecord[],
  strategy: BatchStrategy,
  maxPayloadBytes: number,
  from = 0,
): MiniBatch[] {
  const out: MiniBatch[] = [];
  let i = from;
  while (i < records.length) {
    const first = i;
    let size = records[i]!.data.byteLength;
    i++;
    if (strategy === 'MultiRecord') {
      while (i < records.length && size + 1 + records[i]!.data.byteLength <= maxPayloadBytes) {
        size += 1 + records[i]!.data.byteLength;
        i++;
      }
    }
    const slice = records.slice(first, i);
    out.push({ index: out.length, first, records: slice, body: join(slice) });
  }
  return out;
}

/** An answer as it goes into the output: with `Line`, its trailing newline normalised to exactly one. */
export function assemble(answer: Uint8Array, assembleWith: AssembleWith): Uint8Array {
  if (assembleWith === 'None') return answer;
  let end = answer.length;
  while (end > 0 && (answer[end - 1] === 0x0a || answer[end - 1] === 0x0d)) end--;
  return Buffer.concat([answer.subarray(0, end), NEWLINE]);
}

/** Media type by file extension, for inputs given without `--content-type`. */
export function contentTypeFor(name: string): string | undefined {
  const ext = /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase();
  switch (ext) {
    case 'jsonl':
    case 'jsonlines':
      return 'application/jsonlines';
    case 'json':
      return 'application/json';
    case 'csv':
      return 'text/csv';
    case 'jpg':
    case 'jpeg':
      return 'image/jpeg';
    case 'png':
      return 'image/png';
    case 'webp':
      return 'image/webp';
    default:
      return undefined;
  }
}
