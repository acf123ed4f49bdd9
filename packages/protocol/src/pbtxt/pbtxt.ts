/**
 * A schema-free parser for the protobuf text format (the `.pbtxt` / `.config`
 * files TF Serving users already have: model_config_list, batching parameters,
 * monitoring config). It produces a generic tree; callers map it onto their own
 * types with `readMessage` (pbtxt-reader.ts), which reports `line:column` positions.
 *
 * Supported: nested messages `name { ... }` / `name: { ... }` / `name < ... >`,
 * `key: value` scalars, single/double-quoted strings with C escapes (adjacent
 * strings concatenate), decimal/hex/octal integers, floats (`1.5`, `1e3`, `2.5f`,
 * `inf`, `-nan`), identifiers (bools, enums), `#` comments, `,`/`;` separators,
 * repeated fields (by repetition or `[a, b]` lists) and `[ext.name]` field names.
 *
 * Errors are INVALID_ARGUMENT ServingErrors whose message starts with
 * `<source>:<line>:<column>: ` (source defaults to "pbtxt"). Lines and columns are 1-based.
 */
import { invalidArgument, type ServingError } from '../errors.js';

export interface PbPosition {
  /** 1-based line. */
  readonly line: number;
  /** 1-based column (UTF-16 code units). */
  readonly column: number;
}

/** A quoted string, already unescaped and decoded as UTF-8. */
export interface PbString extends PbPosition {
  readonly kind: 'string';
  readonly value: string;
}

/** A numeric literal; `text` keeps the source spelling (for int64 precision). */
export interface PbNumber extends PbPosition {
  readonly kind: 'number';
  readonly value: number;
  /** Normalised literal without a float suffix, e.g. "-12", "0x1f", "2.5", "inf". */
  readonly text: string;
  /** True when the literal is an integer (decimal, hex or octal, no fraction/exponent). */
  readonly integer: boolean;
}

/** A bare identifier: `true`, `false`, an enum value name. */
export interface PbIdentifier extends PbPosition {
  readonly kind: 'identifier';
  readonly value: string;
}

export interface PbMessage extends PbPosition {
  readonly kind: 'message';
  /** Fields in source order; a repeated field appears once per value. */
  readonly fields: readonly PbField[];
}

export type PbScalar = PbString | PbNumber | PbIdentifier;
export type PbValue = PbScalar | PbMessage;

export interface PbField extends PbPosition {
  /** Field name as written (`[a.b]` names keep their brackets). */
  readonly name: string;
  readonly value: PbValue;
}

export interface PbtxtParseOptions {
  /** Name used in error messages, e.g. the file name. Default "pbtxt". */
  readonly source?: string;
}

type TokenKind = 'ident' | 'number' | 'string' | 'punct' | 'eof';

interface Token extends PbPosition {
  readonly kind: TokenKind;
  /** ident/number/punct: the source text; string: the decoded value. */
  readonly text: string;
}

const IDENT_START = /[A-Za-z_]/;
const IDENT_PART = /[A-Za-z0-9_]/;
const PUNCT = new Set(['{', '}', '<', '>', '[', ']', ':', ',', ';', '-', '/', '.']);

/**
 * Error with position, as every pbtxt failure is reported: `<source>:<line>:<column>: `, or
 * with a textFormatSource `Error parsing text-format <type>: <line>:<column>: ` (protobuf's).
 */
export function pbtxtError(source: string, at: PbPosition, message: string): ServingError {
  const prefix = source.endsWith(': ') ? source : `${source}:`;
  return invalidArgument(`${prefix}${at.line}:${at.column}: ${message}`);
}

/**
 * A source under which errors read as protobuf's text-format parser words them (and TF
 * Serving logs them): `Error parsing text-format tensorflow.serving.ModelServerConfig: 3:5: ...`.
 */
export function textFormatSource(messageType: string): string {
  return `Error parsing text-format ${messageType}: `;
}

class Lexer {
  private pos = 0;
  private line = 1;
  private lineStart = 0;

  constructor(
    private readonly text: string,
    private readonly source: string,
  ) {}

  private error(line: number, column: number, message: string): ServingError {
    return pbtxtError(this.source, { line, column }, message);
  }

  private skipSpaceAndComments(): void {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t[this.pos]!;
      if (c === '\n') {
        this.pos++;
        this.line++;
        this.lineStart = this.pos;
      } else if (c === ' ' || c === '\t' || c === '\r' || c === '\f' || c === '\v') {
        this.pos++;
      } else if (c === '#') {
        while (this.pos < t.length && t[this.pos] !== '\n') this.pos++;
      } else {
        return;
      }
    }
  }

  next(): Token {
    this.skipSpaceAndComments();
    const t = this.text;
    const line = this.line;
    const column = this.pos - this.lineStart + 1;
    if (this.pos >= t.length) return { kind: 'eof', text: '', line, column };
    const c = t[this.pos]!;
    if (IDENT_START.test(c)) {
      const start = this.pos;
      while (this.pos < t.length && IDENT_PART.test(t[this.pos]!)) this.pos++;
      return { kind: 'ident', text: t.slice(start, this.pos), line, column };
    }
    if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(t[this.pos + 1] ?? ''))) {
      const m = /^(0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fF]?)/.exec(
        t.slice(this.pos, this.pos + 512),
      );
      const text = m?.[0] ?? c;
      this.pos += text.length;
      if (this.pos < t.length && IDENT_PART.test(t[this.pos]!)) {
        throw this.error(line, column, `invalid number "${text}${t[this.pos]!}"`);
      }
      return { kind: 'number', text, line, column };
    }
    if (c === '"' || c === "'")
      return { kind: 'string', text: this.readString(c, line, column), line, column };
    if (PUNCT.has(c)) {
      this.pos++;
      return { kind: 'punct', text: c, line, column };
    }
    throw this.error(line, column, `unexpected character ${JSON.stringify(c)}`);
  }

  /** Reads one quoted string starting at the opening quote; returns the decoded value. */
  private readString(quote: string, line: number, column: number): string {
    const t = this.text;
    const bytes: number[] = [];
    const encoder = new TextEncoder();
    const pushText = (s: string): void => {
      for (const b of encoder.encode(s)) bytes.push(b);
    };
    this.pos++;
    for (;;) {
      if (this.pos >= t.length || t[this.pos] === '\n') {
        throw this.error(line, column, 'unterminated string');
      }
      const c = t[this.pos]!;
      if (c === quote) {
        this.pos++;
        break;
      }
      if (c !== '\\') {
        const cp = t.codePointAt(this.pos)!;
        const ch = String.fromCodePoint(cp);
        pushText(ch);
        this.pos += ch.length;
        continue;
      }
      const escLine = this.line;
      const escColumn = this.pos - this.lineStart + 1;
      const e = t[this.pos + 1];
      this.pos += 2;
      switch (e) {
        case 'n':
          bytes.push(0x0a);
          break;
        case 't':
          bytes.push(0x09);
          break;
        case 'r':
          bytes.push(0x0d);
          break;
        case 'a':
          bytes.push(0x07);
          break;
        case 'b':
          bytes.push(0x08);
          break;
        case 'f':
          bytes.push(0x0c);
          break;
        case 'v':
          bytes.push(0x0b);
          break;
        case '\\':
        case "'":
        case '"':
        case '?':
          pushText(e);
          break;
        case 'x':
        case 'X': {
          const m = /^[0-9a-fA-F]{1,2}/.exec(t.slice(this.pos, this.pos + 2));
          if (!m) throw this.error(escLine, escColumn, 'invalid \\x escape');
          bytes.push(parseInt(m[0], 16));
          this.pos += m[0].length;
          break;
        }
        case 'u':
        case 'U': {
          const len = e === 'u' ? 4 : 8;
          const hex = t.slice(this.pos, this.pos + len);
          const cp = /^[0-9a-fA-F]+$/.test(hex) && hex.length === len ? parseInt(hex, 16) : NaN;
          if (!(cp <= 0x10ffff)) throw this.error(escLine, escColumn, `invalid \\${e} escape`);
          pushText(String.fromCodePoint(cp));
          this.pos += len;
          break;
        }
        default: {
          if (e !== undefined && /[0-7]/.test(e)) {
            const m = /^[0-7]{1,3}/.exec(t.slice(this.pos - 1, this.pos + 2))!;
            const value = parseInt(m[0], 8);
            if (value > 0xff) throw this.error(escLine, escColumn, 'octal escape out of range');
            bytes.push(value);
            this.pos += m[0].length - 1;
            break;
          }
          throw this.error(escLine, escColumn, `invalid escape "\\${e ?? ''}"`);
        }
      }
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
    } catch {
      throw this.error(line, column, 'string is not valid UTF-8');
    }
  }
}

/**
 * Deepest nesting of messages accepted, as protobuf's own text parser (its default
 * recursion limit); deeper input is INVALID_ARGUMENT instead of a stack overflow.
 */
export const MAX_PBTXT_DEPTH = 100;

class Parser {
  private readonly lexer: Lexer;
  private token: Token;
  private depth = 0;

  constructor(
    text: string,
    private readonly source: string,
  ) {
    this.lexer = new Lexer(text, source);
    this.token = this.lexer.next();
  }

  private error(at: PbPosition, message: string): ServingError {
    return pbtxtError(this.source, at, message);
  }

  private advance(): Token {
    const t = this.token;
    this.token = this.lexer.next();
    return t;
  }

  private isPunct(p: string): boolean {
    return this.token.kind === 'punct' && this.token.text === p;
  }

  private describe(t: Token): string {
    if (t.kind === 'eof') return 'end of input';
    if (t.kind === 'string') return `string ${JSON.stringify(t.text)}`;
    return `"${t.text}"`;
  }

  private expectPunct(p: string, what: string): Token {
    if (!this.isPunct(p))
      throw this.error(this.token, `expected ${what}, found ${this.describe(this.token)}`);
    return this.advance();
  }

  parseDocument(): PbMessage {
    const fields = this.parseFields(undefined);
    if (this.token.kind !== 'eof') {
      throw this.error(this.token, `unexpected ${this.describe(this.token)}`);
    }
    return { kind: 'message', fields, line: 1, column: 1 };
  }

  /** Fields until `close` (or end of input when `close` is undefined). */
  private parseFields(close: string | undefined): PbField[] {
    const fields: PbField[] = [];
    for (;;) {
      if (close === undefined ? this.token.kind === 'eof' : this.isPunct(close)) return fields;
      if (this.token.kind === 'eof') {
        throw this.error(this.token, `expected "${close ?? ''}" before end of input`);
      }
      if (this.isPunct('}') || this.isPunct('>')) {
        throw this.error(this.token, `unexpected ${this.describe(this.token)}`);
      }
      this.parseField(fields);
      if (this.isPunct(',') || this.isPunct(';')) this.advance();
    }
  }

  private parseFieldName(): Token {
    const t = this.token;
    if (t.kind === 'ident') return this.advance();
    if (this.isPunct('[')) {
      // Extension or Any type URL: [type.googleapis.com/pkg.Msg]
      this.advance();
      let name = '';
      while (!this.isPunct(']')) {
        const part = this.token;
        if (part.kind === 'ident' || (part.kind === 'punct' && (part.text === '.' || part.text === '/'))) {
          name += part.text;
          this.advance();
        } else {
          throw this.error(part, `invalid extension name near ${this.describe(part)}`);
        }
      }
      this.advance();
      if (name === '') throw this.error(t, 'empty extension name');
      return { kind: 'ident', text: `[${name}]`, line: t.line, column: t.column };
    }
    throw this.error(t, `expected field name, found ${this.describe(t)}`);
  }

  private parseField(out: PbField[]): void {
    const nameToken = this.parseFieldName();
    const push = (value: PbValue): void => {
      out.push({ name: nameToken.text, value, line: nameToken.line, column: nameToken.column });
    };
    const colon = this.isPunct(':');
    if (colon) this.advance();
    if (this.isPunct('{') || this.isPunct('<')) {
      push(this.parseMessage());
      return;
    }
    if (!colon) {
      throw this.error(this.token, `expected ":" or "{" after field "${nameToken.text}"`);
    }
    if (this.isPunct('[')) {
      this.advance();
      if (this.isPunct(']')) {
        this.advance();
        return;
      }
      for (;;) {
        push(this.isPunct('{') || this.isPunct('<') ? this.parseMessage() : this.parseScalar());
        if (this.isPunct(']')) {
          this.advance();
          return;
        }
        this.expectPunct(',', '"," or "]" in list');
      }
    }
    push(this.parseScalar());
  }

  private parseMessage(): PbMessage {
    if (this.depth >= MAX_PBTXT_DEPTH) {
      throw this.error(this.token, `messages nested deeper than ${MAX_PBTXT_DEPTH} levels`);
    }
    const open = this.advance();
    const close = open.text === '{' ? '}' : '>';
    this.depth++;
    const fields = this.parseFields(close);
    this.depth--;
    this.advance();
    return { kind: 'message', fields, line: open.line, column: open.column };
  }

  private parseScalar(): PbScalar {
    const t = this.token;
    if (t.kind === 'string') {
      let value = '';
      while (this.token.kind === 'string') value += this.advance().text;
      return { kind: 'string', value, line: t.line, column: t.column };
    }
    let negative = false;
    if (this.isPunct('-')) {
      negative = true;
      this.advance();
    }
    const v = this.token;
    if (v.kind === 'number') {
      this.advance();
      return numberLiteral(v.text, negative, t, this.source);
    }
    if (v.kind === 'ident') {
      const lower = v.text.toLowerCase();
      if (lower === 'inf' || lower === 'infinity' || lower === 'nan') {
        this.advance();
        const value = lower === 'nan' ? NaN : negative ? -Infinity : Infinity;
        const text = lower === 'nan' ? 'nan' : negative ? '-inf' : 'inf';
        return { kind: 'number', value, text, integer: false, line: t.line, column: t.column };
      }
      if (!negative) {
        this.advance();
        return { kind: 'identifier', value: v.text, line: t.line, column: t.column };
      }
    }
    throw this.error(v, `expected a value, found ${this.describe(v)}`);
  }
}

function numberLiteral(raw: string, negative: boolean, at: PbPosition, source: string): PbNumber {
  const sign = negative ? '-' : '';
  if (/^0[xX]/.test(raw)) {
    const value = Number(BigInt(raw)) * (negative ? -1 : 1);
    return { kind: 'number', value, text: sign + raw, integer: true, line: at.line, column: at.column };
  }
  if (/^0[0-7]+$/.test(raw)) {
    const value = parseInt(raw, 8) * (negative ? -1 : 1);
    return { kind: 'number', value, text: sign + raw, integer: true, line: at.line, column: at.column };
  }
  if (/^0[0-9]+$/.test(raw)) throw pbtxtError(source, at, `invalid octal number "${raw}"`);
  const body = raw.replace(/[fF]$/, '');
  const integer = /^[0-9]+$/.test(body) && body === raw;
  const value = Number(sign + body);
  if (Number.isNaN(value)) throw pbtxtError(source, at, `invalid number "${raw}"`);
  return { kind: 'number', value, text: sign + body, integer, line: at.line, column: at.column };
}

/** Parses a whole text-format document into its top-level message. */
export function parsePbtxt(text: string, options: PbtxtParseOptions = {}): PbMessage {
  return new Parser(text, options.source ?? 'pbtxt').parseDocument();
}
