/**
 * Label files, the one implementation for the server, the client and the CLI:
 * `lines` (line i is class i), `synset` (the ImageNet file, WordNet ids dropped) and
 * TF Object Detection API label maps (`item { id: 1 display_name: "person" }`).
 */
import { invalidArgument } from '@visionserve/protocol';
import { fieldMessage, parsePbtxt, readMessage } from '@visionserve/protocol/pbtxt';

/** How a labels file is read. */
export type LabelsFormat =
  /** One label a line; line i (0-based, blank lines kept) is class i. */
  | 'lines'
  /** Like `lines`, but a leading WordNet id ("n02123045 ") is dropped from each line. */
  | 'synset'
  /** TF Object Detection API label map (`item { id: 1 display_name: "person" }`); id -> display_name (or name). */
  | 'label_map';

/** Class id -> name. */
export type Labels = ReadonlyMap<number, string>;

const WORDNET_ID = /^n\d{8}\s+/;

/**
 * The format a labels file is read in: explicit, else by content and extension
 * (`.pbtxt` or text holding `item {` is a label map; lines starting with a WordNet id
 * are a synset file; anything else is `lines`).
 */
export function labelsFormatFor(path: string, format?: LabelsFormat, text?: string): LabelsFormat {
  if (format !== undefined) return format;
  if (path.toLowerCase().endsWith('.pbtxt') || (text !== undefined && /^\s*item\s*\{/m.test(text))) {
    return 'label_map';
  }
  if (text !== undefined && WORDNET_ID.test(text)) return 'synset';
  return 'lines';
}

/** Parses a `lines` or `synset` labels file: index -> label. */
export function parseLabelLines(text: string, format: 'lines' | 'synset'): Map<number, string> {
  const lines = text.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  const out = new Map<number, string>();
  lines.forEach((line, i) => {
    out.set(i, (format === 'synset' ? line.replace(WORDNET_ID, '') : line).trim());
  });
  return out;
}

/**
 * Parses a TF Object Detection API label map (`StringIntLabelMap` text format), e.g.
 * `item { name: "/m/01g317" id: 1 display_name: "person" }`, as id -> display_name (or
 * name when there is none). Other item fields are ignored. INVALID_ARGUMENT for syntax
 * errors, an item without id or name, a duplicate id, or no items.
 */
export function parseLabelMap(text: string, source = 'label map'): Map<number, string> {
  const root = readMessage(parsePbtxt(text, { source }), source);
  const out = new Map<number, string>();
  for (const field of root.all('item')) {
    const item = readMessage(fieldMessage(field, source), source);
    const id = item.int('id');
    const label = item.string('display_name') ?? item.string('name');
    if (id === undefined || label === undefined) {
      throw item.error('label map item needs an id and a display_name or name');
    }
    if (out.has(id)) throw item.error(`duplicate label map id ${id}`);
    out.set(id, label);
  }
  if (out.size === 0) throw invalidArgument(`${source}: no items`);
  return out;
}

/** Reads a labels file in the given (or detected) format; `source` names it in errors. */
export function parseLabels(text: string, source: string, format?: LabelsFormat): Map<number, string> {
  const resolved = labelsFormatFor(source, format, text);
  return resolved === 'label_map' ? parseLabelMap(text, source) : parseLabelLines(text, resolved);
}
