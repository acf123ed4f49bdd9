/**
 * The protobuf text format read into a generated message, as TF Serving reads every config file
 * (`ParseProtoTextFile` into its message): the schema-free tree of pbtxt.ts mapped onto a
 * message descriptor by reflection. Unknown fields, a singular field given twice, a value of the
 * wrong kind and an unknown enum name are INVALID_ARGUMENT errors at `<source>:<line>:<column>`,
 * worded as protobuf's own text parser words them. The returned `where` gives the position of any
 * message of the result (and of its fields), so that a caller's semantic checks can point at the
 * line too.
 */
import {
  type DescEnum,
  type DescField,
  type DescMessage,
  type MessageShape,
  ScalarType,
  create,
} from '@bufbuild/protobuf';
import { type ReflectMessage, reflect } from '@bufbuild/protobuf/reflect';
import type { ServingError } from '../errors.js';
import {
  type PbField,
  type PbMessage,
  type PbPosition,
  type PbValue,
  parsePbtxt,
  pbtxtError,
} from './pbtxt.js';

/** Where a message of the result was written: its `{`, the field naming it, its fields. */
interface MessagePositions {
  readonly self: PbPosition;
  readonly field: PbPosition;
  readonly fields: Map<string, PbPosition>;
}

export interface TextMessage<T> {
  readonly message: T;
  /**
   * The position of `field` (its proto name) in `message`, or of the message itself; undefined
   * for an object that is not a message of this result.
   */
  where(message: object, field?: string): PbPosition | undefined;
  /** Whether the text wrote `field` in `message` (proto3 cannot tell `x: false` from absent). */
  written(message: object, field: string): boolean;
  /** The position of the field that holds `message` (`config {` of a repeated `config`). */
  whereField(message: object): PbPosition | undefined;
  /** An INVALID_ARGUMENT error at `message` (or its `field`), worded `<source>:<line>:<col>: text`. */
  readonly error: (text: string, message: object, field?: string) => ServingError;
}

/** Parses `text` as a `schema` message in the protobuf text format. */
export function parseTextMessage<Desc extends DescMessage>(
  schema: Desc,
  text: string,
  options: { readonly source?: string } = {},
): TextMessage<MessageShape<Desc>> {
  const source = options.source ?? 'pbtxt';
  const tree = parsePbtxt(text, { source });
  const positions = new WeakMap<object, MessagePositions>();
  const reader = new MessageReader(source, positions);
  const message = create(schema);
  reader.fill(reflect(schema, message), tree, tree);
  const where = (m: object, field?: string): PbPosition | undefined => {
    const p = positions.get(m);
    return field === undefined ? p?.self : (p?.fields.get(field) ?? p?.self);
  };
  return {
    message,
    where,
    written: (m, field) => positions.get(m)?.fields.has(field) ?? false,
    whereField: (m) => positions.get(m)?.field,
    error: (t, m, field) => pbtxtError(source, where(m, field) ?? { line: 1, column: 1 }, t),
  };
}

class MessageReader {
  constructor(
    private readonly source: string,
    private readonly positions: WeakMap<object, MessagePositions>,
  ) {}

  private error(at: PbPosition, text: string): ServingError {
    return pbtxtError(this.source, at, text);
  }

  /** Sets every field of `node` on `target`. */
  fill(target: ReflectMessage, node: PbMessage, heldBy: PbPosition): void {
    const fields = new Map<string, PbPosition>();
    this.positions.set(target.message, { self: node, field: heldBy, fields });
    const seen = new Set<string>();
    for (const f of node.fields) {
      const field = target.desc.fields.find((d) => d.name === f.name);
      if (field === undefined) {
        throw this.error(f, `Message type "${target.desc.typeName}" has no field named "${f.name}".`);
      }
      const repeated = field.fieldKind === 'list' || field.fieldKind === 'map';
      if (!repeated && seen.has(field.name)) {
        throw this.error(f, `Non-repeated field "${field.name}" is specified multiple times.`);
      }
      if (field.oneof !== undefined && !seen.has(field.name)) {
        const other = field.oneof.fields.find((o) => o !== field && seen.has(o.name));
        if (other !== undefined) {
          throw this.error(
            f,
            `Field "${field.name}" is specified along with field "${other.name}", another member of oneof "${field.oneof.name}".`,
          );
        }
      }
      seen.add(field.name);
      if (!fields.has(field.name)) fields.set(field.name, f);
      this.setField(target, field, f);
    }
  }

  private setField(target: ReflectMessage, field: DescField, f: PbField): void {
    switch (field.fieldKind) {
      case 'scalar':
        target.set(field, this.scalar(field.scalar, f.value, field.name));
        return;
      case 'enum':
        target.set(field, this.enumValue(field.enum, f.value, field.name));
        return;
      case 'message':
        target.set(field, this.child(field.message, f));
        return;
      case 'list':
        this.addListItem(target, field, f);
        return;
      case 'map':
        this.setMapEntry(target, field, f);
        return;
    }
  }

  private child(schema: DescMessage, f: PbField): ReflectMessage {
    const child = reflect(schema, create(schema));
    if (f.value.kind === 'message') {
      this.fill(child, f.value, f);
      return child;
    }
    // A wrapper (google.protobuf.Int64Value, ...) may be written as its bare value, `x: 32`, as
    // TF Serving's batching examples do; anything else needs a message.
    const value = isWrapper(schema) ? schema.fields[0] : undefined;
    if (value?.fieldKind !== 'scalar') throw this.error(f.value, `Expected "{", found ${describe(f.value)}.`);
    this.positions.set(child.message, { self: f.value, field: f, fields: new Map([['value', f.value]]) });
    child.set(value, this.scalar(value.scalar, f.value, f.name));
    return child;
  }

  private addListItem(target: ReflectMessage, field: DescField & { fieldKind: 'list' }, f: PbField): void {
    const list = target.get(field);
    if (field.listKind === 'message') list.add(this.child(field.message, f));
    else if (field.listKind === 'enum') list.add(this.enumValue(field.enum, f.value, field.name));
    else list.add(this.scalar(field.scalar, f.value, field.name));
  }

  private setMapEntry(target: ReflectMessage, field: DescField & { fieldKind: 'map' }, f: PbField): void {
    if (f.value.kind !== 'message') throw this.error(f.value, `Expected "{", found ${describe(f.value)}.`);
    const entry = f.value;
    const known = ['key', 'value'];
    const unknown = entry.fields.find((e) => !known.includes(e.name));
    if (unknown !== undefined) {
      throw this.error(unknown, `Message type "${field.name}Entry" has no field named "${unknown.name}".`);
    }
    const keyField = entry.fields.find((e) => e.name === 'key');
    const valueField = entry.fields.find((e) => e.name === 'value');
    const key =
      keyField === undefined ? mapKeyDefault(field.mapKey) : this.scalar(field.mapKey, keyField.value, 'key');
    const map = target.get(field);
    if (map.has(key)) {
      throw this.error(
        f,
        `Map field "${field.name}" has the key ${JSON.stringify(String(key))} more than once.`,
      );
    }
    let value: unknown;
    if (field.mapKind === 'message') {
      value =
        valueField === undefined
          ? reflect(field.message, create(field.message))
          : this.child(field.message, valueField);
    } else if (field.mapKind === 'enum') {
      value = valueField === undefined ? 0 : this.enumValue(field.enum, valueField.value, 'value');
    } else {
      value =
        valueField === undefined
          ? scalarDefault(field.scalar)
          : this.scalar(field.scalar, valueField.value, 'value');
    }
    map.set(key, value);
  }

  private enumValue(desc: DescEnum, v: PbValue, name: string): number {
    if (v.kind === 'identifier') {
      const found = desc.values.find((e) => e.name === v.value);
      if (found === undefined) {
        throw this.error(v, `Unknown enumeration value of "${v.value}" for field "${name}".`);
      }
      return found.number;
    }
    if (v.kind === 'number' && v.integer && Number.isSafeInteger(v.value)) return v.value;
    throw this.error(v, `Expected identifier, got: ${describe(v)}`);
  }

  private scalar(type: ScalarType, v: PbValue, name: string): unknown {
    switch (type) {
      case ScalarType.STRING:
        if (v.kind !== 'string') throw this.error(v, `Expected string, got: ${describe(v)}`);
        return v.value;
      case ScalarType.BYTES:
        if (v.kind !== 'string') throw this.error(v, `Expected string, got: ${describe(v)}`);
        return new TextEncoder().encode(v.value);
      case ScalarType.BOOL:
        return this.bool(v, name);
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        if (v.kind === 'number') return v.value;
        throw this.error(v, `Expected double, got: ${describe(v)}`);
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64:
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return this.int64(type, v);
      default:
        return this.int32(type, v);
    }
  }

  private bool(v: PbValue, name: string): boolean {
    if (v.kind === 'identifier' && ['true', 'True', 't'].includes(v.value)) return true;
    if (v.kind === 'identifier' && ['false', 'False', 'f'].includes(v.value)) return false;
    if (v.kind === 'number' && v.integer && (v.value === 0 || v.value === 1)) return v.value === 1;
    throw this.error(v, `Invalid value for boolean field "${name}". Value: "${describeRaw(v)}".`);
  }

  private int64(type: ScalarType, v: PbValue): bigint {
    if (v.kind !== 'number' || !v.integer) throw this.error(v, `Expected integer, got: ${describe(v)}`);
    const n = BigInt(v.text);
    const unsigned = type === ScalarType.UINT64 || type === ScalarType.FIXED64;
    const [min, max] = unsigned ? [0n, 2n ** 64n - 1n] : [-(2n ** 63n), 2n ** 63n - 1n];
    if (n < min || n > max) throw this.error(v, `Integer out of range (${v.text})`);
    return n;
  }

  private int32(type: ScalarType, v: PbValue): number {
    if (v.kind !== 'number' || !v.integer) throw this.error(v, `Expected integer, got: ${describe(v)}`);
    const unsigned = type === ScalarType.UINT32 || type === ScalarType.FIXED32;
    const [min, max] = unsigned ? [0, 2 ** 32 - 1] : [-(2 ** 31), 2 ** 31 - 1];
    if (!Number.isSafeInteger(v.value) || v.value < min || v.value > max) {
      throw this.error(v, `Integer out of range (${v.text})`);
    }
    return v.value;
  }
}

function isWrapper(schema: DescMessage): boolean {
  return /^google\.protobuf\.(Double|Float|Int64|UInt64|Int32|UInt32|Bool|String|Bytes)Value$/.test(
    schema.typeName,
  );
}

function describeRaw(v: PbValue): string {
  switch (v.kind) {
    case 'string':
      return v.value;
    case 'number':
      return v.text;
    case 'identifier':
      return v.value;
    case 'message':
      return '{';
  }
}

function describe(v: PbValue): string {
  return v.kind === 'string' ? JSON.stringify(v.value) : describeRaw(v);
}

function scalarDefault(type: ScalarType): unknown {
  switch (type) {
    case ScalarType.STRING:
      return '';
    case ScalarType.BYTES:
      return new Uint8Array(0);
    case ScalarType.BOOL:
      return false;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return 0n;
    default:
      return 0;
  }
}

function mapKeyDefault(type: ScalarType): string | number | bigint | boolean {
  return scalarDefault(type) as string | number | bigint | boolean;
}
