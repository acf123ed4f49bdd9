/** Shared argument handling for the CLI commands (node:util parseArgs, strict). */
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';

/** A CLI command: its help text and its runner (resolves with the exit code; throws UsageError for exit 2). */
export interface Command {
  readonly help: string;
  run(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number>;
}

/** A command-line mistake: the CLI prints it with the command's help and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type OptionSpecs = NonNullable<ParseArgsConfig['options']>;
export type ParsedValues = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** parseArgs with unknown options and missing values turned into UsageErrors. */
export function parseCommandArgs(
  argv: readonly string[],
  options: OptionSpecs,
): { values: ParsedValues; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      options,
      allowPositionals: true,
      strict: true,
    });
    return { values: values, positionals };
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

export function stringOption(values: ParsedValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

export function flag(values: ParsedValues, name: string): boolean {
  return values[name] === true;
}

/** A numeric option; UsageError when it is not a number in [min, max] (or not an integer when asked). */
export function numberOption(
  values: ParsedValues,
  name: string,
  limits: { min?: number; max?: number; integer?: boolean } = {},
): number | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || (limits.integer === true && !Number.isInteger(n))) {
    throw new UsageError(
      `--${name} expects ${limits.integer === true ? 'an integer' : 'a number'}, got "${raw}"`,
    );
  }
  if ((limits.min !== undefined && n < limits.min) || (limits.max !== undefined && n > limits.max)) {
    throw new UsageError(`--${name} must be in [${limits.min ?? '-inf'}, ${limits.max ?? 'inf'}], got ${n}`);
  }
  return n;
}

/** One of a fixed set of strings. */
export function choiceOption<T extends string>(
  values: ParsedValues,
  name: string,
  choices: readonly T[],
): T | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  if (!(choices as readonly string[]).includes(raw)) {
    throw new UsageError(`--${name} expects one of ${choices.join('|')}, got "${raw}"`);
  }
  return raw as T;
}

/** A comma-separated list of numbers ("0.485,0.456,0.406"). */
export function numberListOption(values: ParsedValues, name: string): number[] | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const list = raw.split(',').map((s) => Number(s.trim()));
  if (list.some((n) => !Number.isFinite(n)))
    throw new UsageError(`--${name} expects comma-separated numbers, got "${raw}"`);
  return list;
}

/** A comma-separated list of names. */
export function listOption(values: ParsedValues, name: string): string[] | undefined {
  const raw = stringOption(values, name);
  return raw === undefined
    ? undefined
    : raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
}

/** Progress on stderr: a line redrawn in place on a terminal, or plain lines elsewhere. */
export interface Progress {
  /** Transient news: redrawn on a terminal, dropped elsewhere. */
  update(text: string): void;
  /** A milestone: redrawn on a terminal, a line of its own elsewhere (logs, pipes, CI). */
  step(text: string): void;
  done(): void;
}

export function createProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  const active = stream.isTTY;
  let shown = false;
  const update = (text: string): void => {
    if (!active) return;
    const width = Math.max(20, (stream.columns || 80) - 1);
    stream.write(`\r\x1b[K${text.length > width ? text.slice(0, width - 1) + '…' : text}`);
    shown = true;
  };
  return {
    update,
    step(text) {
      if (active) update(text);
      else stream.write(`${text}\n`);
    },
    done() {
      if (active && shown) stream.write('\r\x1b[K');
      shown = false;
    },
  };
}
