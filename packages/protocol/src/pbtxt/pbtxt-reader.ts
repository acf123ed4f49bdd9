/**
 * Typed readers over a parsed text-format tree: map it onto a known schema with
 * INVALID_ARGUMENT errors positioned at `<source>:<line>:<column>`.
 */
import type { ServingError } from '../errors.js';
import { type PbField, type PbMessage, type PbPosition, pbtxtError } from './pbtxt.js';

/**
 * Reads the fields of one message against a known set of field names. Unknown
 * fields, a singular field given twice and type mismatches are INVALID_ARGUMENT
 * errors with the field's position.
 */
export interface PbMessageReader {
  readonly message: PbMessage;
  /** Throws for any field whose name is not in `known`. */
  checkKnown(known: readonly string[], context: string): void;
  /** All values of a repeated field, in order. */
  all(name: string): readonly PbField[];
  /** The single value of a singular field, or undefined; throws if repeated. */
  one(name: string): PbField | undefined;
  string(name: string): string | undefined;
  /** An integer field as a safe JS number. */
  int(name: string): number | undefined;
  bool(name: string): boolean | undefined;
  float(name: string): number | undefined;
  /** A nested message, or undefined. */
  messageField(name: string): PbMessageReader | undefined;
  /** Builds an error positioned at `at` (or the message). */
  error(message: string, at?: PbPosition): ServingError;
}

export function readMessage(message: PbMessage, source = 'pbtxt'): PbMessageReader {
  const err = (message2: string, at: PbPosition = message): ServingError => pbtxtError(source, at, message2);
  const all = (name: string): readonly PbField[] => message.fields.filter((f) => f.name === name);
  const one = (name: string): PbField | undefined => {
    const found = all(name);
    if (found.length > 1) throw err(`field "${name}" given more than once`, found[1]);
    return found[0];
  };
  return {
    message,
    error: err,
    checkKnown(known, context) {
      for (const f of message.fields) {
        if (!known.includes(f.name)) {
          throw err(`unknown field "${f.name}" in ${context} (expected one of: ${known.join(', ')})`, f);
        }
      }
    },
    all,
    one,
    string(name) {
      const f = one(name);
      return f === undefined ? undefined : fieldString(f, source);
    },
    int(name) {
      const f = one(name);
      return f === undefined ? undefined : fieldInt(f, source);
    },
    bool(name) {
      const f = one(name);
      return f === undefined ? undefined : fieldBool(f, source);
    },
    float(name) {
      const f = one(name);
      return f === undefined ? undefined : fieldFloat(f, source);
    },
    messageField(name) {
      const f = one(name);
      return f === undefined ? undefined : readMessage(fieldMessage(f, source), source);
    },
  };
}

export function fieldString(f: PbField, source = 'pbtxt'): string {
  if (f.value.kind !== 'string') throw pbtxtError(source, f.value, `field "${f.name}" expects a string`);
  return f.value.value;
}

export function fieldInt(f: PbField, source = 'pbtxt'): number {
  const v = f.value;
  if (v.kind !== 'number' || !v.integer) {
    throw pbtxtError(source, v, `field "${f.name}" expects an integer`);
  }
  if (!Number.isSafeInteger(v.value))
    throw pbtxtError(source, v, `field "${f.name}": ${v.text} is too large`);
  return v.value;
}

export function fieldFloat(f: PbField, source = 'pbtxt'): number {
  const v = f.value;
  if (v.kind !== 'number') throw pbtxtError(source, v, `field "${f.name}" expects a number`);
  return v.value;
}

export function fieldBool(f: PbField, source = 'pbtxt'): boolean {
  const v = f.value;
  if (v.kind === 'identifier' && (v.value === 'true' || v.value === 'True' || v.value === 't')) return true;
  if (v.kind === 'identifier' && (v.value === 'false' || v.value === 'False' || v.value === 'f'))
    return false;
  if (v.kind === 'number' && v.integer && (v.value === 0 || v.value === 1)) return v.value === 1;
  throw pbtxtError(source, v, `field "${f.name}" expects true or false`);
}

export function fieldMessage(f: PbField, source = 'pbtxt'): PbMessage {
  if (f.value.kind !== 'message')
    throw pbtxtError(source, f.value, `field "${f.name}" expects a message { ... }`);
  return f.value;
}
