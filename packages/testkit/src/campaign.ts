/**
 * Campaign settings and reporting shared by the fuzz targets of every package
 * (`packages/*\/test/fuzz`, run by scripts/fuzz.mjs and with the tests). Not a test file.
 *
 * Environment (set by `npm run fuzz`, see docs/fuzzing.md):
 * - VISIONSERVE_FUZZ_SCALE: multiplies every target's short-campaign run count. Default 1.
 * - VISIONSERVE_FUZZ_SECONDS: a long campaign: every target runs for this many seconds
 *   (run counts are then unbounded).
 * - VISIONSERVE_FUZZ_SEED / VISIONSERVE_FUZZ_PATH: replay a reported failure.
 * - VISIONSERVE_FUZZ_TARGET: run only targets whose name contains this text.
 * - VISIONSERVE_FUZZ_REPORT: a file that receives one JSON line per target run.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import fc from 'fast-check';
import { Code, ServingError } from '@visionserve/protocol';

export interface CampaignSettings {
  readonly scale: number;
  /** Per-target time budget of a long campaign, in seconds; undefined for the short one. */
  readonly seconds: number | undefined;
  readonly seed: number | undefined;
  readonly path: string | undefined;
  readonly target: string | undefined;
  readonly report: string | undefined;
}

function envNumber(name: string): number | undefined {
  const text = process.env[name];
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!Number.isFinite(value)) throw new Error(`${name} must be a number, got "${text}"`);
  return value;
}

export const CAMPAIGN: CampaignSettings = {
  scale: envNumber('VISIONSERVE_FUZZ_SCALE') ?? 1,
  seconds: envNumber('VISIONSERVE_FUZZ_SECONDS'),
  seed: envNumber('VISIONSERVE_FUZZ_SEED'),
  path: process.env['VISIONSERVE_FUZZ_PATH'] || undefined,
  target: process.env['VISIONSERVE_FUZZ_TARGET'] || undefined,
  report: process.env['VISIONSERVE_FUZZ_REPORT'] || undefined,
};

/** Options for node:test's `it` that skip a target the campaign filter leaves out. */
export function targetOptions(name: string, timeoutMs = 120_000): { skip?: string; timeout: number } {
  const timeout = CAMPAIGN.seconds === undefined ? timeoutMs : CAMPAIGN.seconds * 1000 + timeoutMs;
  if (CAMPAIGN.target !== undefined && !name.includes(CAMPAIGN.target)) {
    return { skip: `VISIONSERVE_FUZZ_TARGET=${CAMPAIGN.target}`, timeout };
  }
  return { timeout };
}

/**
 * The git tree of HEAD's packages/ folder (the code under test and its tests; a commit that
 * changes only docs keeps it), or '' outside a git checkout; read once.
 */
let headTree: string | undefined;
function codeTree(): string {
  if (headTree === undefined) {
    try {
      headTree = execFileSync('git', ['rev-parse', 'HEAD:packages'], {
        cwd: fileURLToPath(new URL('.', import.meta.url)),
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    } catch {
      headTree = '';
    }
  }
  return headTree;
}

/**
 * The short campaign's seed for a target: fixed by the committed code (the git tree of HEAD's
 * packages/) and the target's name. So `npm test` on a commit tries exactly the inputs CI tries
 * on that commit (a green local run means a green fuzz run in CI; uncommitted changes run with
 * HEAD's seeds), and each commit that changes the code tries new inputs. The long campaign
 * (`npm run fuzz`) takes a fresh random seed per target.
 */
function shortCampaignSeed(target: string): number {
  return createHash('sha256').update(`${codeTree()}\0${target}`).digest().readInt32LE(0);
}

/**
 * fast-check parameters for a target whose short campaign tries `shortRuns` inputs.
 * `shrink` false reports the first counterexample as found (for targets whose inputs take
 * seconds each, where shrinking would take minutes); the seed and path still replay it.
 */
function parameters<T>(target: string, shortRuns: number, shrink = true): fc.Parameters<T> {
  const long = CAMPAIGN.seconds !== undefined;
  const seed = CAMPAIGN.seed ?? (long ? undefined : shortCampaignSeed(target));
  return {
    ...(shrink ? {} : { endOnFailure: true }),
    numRuns: long ? 2 ** 31 - 1 : Math.max(1, Math.round(shortRuns * CAMPAIGN.scale)),
    ...(long ? { plugins: [fc.interruptAfterTimeLimit(CAMPAIGN.seconds! * 1000) as fc.Plugin<T>] } : {}),
    ...(seed !== undefined ? { seed } : {}),
    ...(CAMPAIGN.path !== undefined ? { path: CAMPAIGN.path } : {}),
  };
}

/** Reports a finished target (test diagnostics, the report file) and fails the test on a counterexample. */
function conclude<T>(t: TestContext, target: string, details: fc.RunDetails<T>, extra: string): void {
  const ok = !details.failed;
  const line = `fuzz ${target}: ${details.numRuns} inputs, ${ok ? 'ok' : 'FAILED'}${extra}`;
  t.diagnostic(line);
  if (CAMPAIGN.report !== undefined) {
    appendFileSync(
      CAMPAIGN.report,
      `${JSON.stringify({ target, inputs: details.numRuns, ok, seed: details.seed, path: details.counterexamplePath, note: extra.trim() })}\n`,
    );
  }
  if (!ok) {
    const replay =
      `replay: npm run fuzz -- --target ${JSON.stringify(target)} --seed ${details.seed}` +
      (details.counterexamplePath === null ? '' : ` --path ${JSON.stringify(details.counterexamplePath)}`);
    const report = (fc.defaultReportMessage(details) ?? 'property failed')
      .split('\n')
      .map((l) => (l.length > 600 ? `${l.slice(0, 600)}... (${l.length} characters)` : l))
      .join('\n');
    const cause =
      details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    throw new Error(`${report}\nerror: ${cause.slice(0, 2000)}\n${replay}`);
  }
}

/** Runs a synchronous property for a target of the campaign. */
export function fuzzSync<T>(
  t: TestContext,
  target: string,
  property: fc.IProperty<T>,
  shortRuns: number,
  extra: () => string = () => '',
): void {
  conclude(t, target, fc.check(property, parameters<T>(target, shortRuns)), extra());
}

/** Runs an asynchronous property for a target of the campaign. */
export async function fuzzAsync<T>(
  t: TestContext,
  target: string,
  property: fc.IAsyncProperty<T>,
  shortRuns: number,
  extra: () => string = () => '',
  shrink = true,
): Promise<void> {
  conclude(t, target, await fc.check(property, parameters<T>(target, shortRuns, shrink)), extra());
}

/** Longest time one input may take in a synchronous decoder before it counts as a hang, in ms. */
export const HANG_MS = 2_000;

/**
 * Runs `fn` and classifies the outcome: a returned value, or a ServingError whose code is
 * one of `allowed`. Anything else thrown (TypeError, RangeError, a ServingError with another
 * code such as INTERNAL) and any call slower than HANG_MS fails the property.
 */
export function outcome<R>(
  fn: () => R,
  allowed: readonly Code[] = [Code.INVALID_ARGUMENT],
): { ok: true; value: R } | { ok: false; error: ServingError } {
  const start = performance.now();
  try {
    const value = fn();
    return { ok: true, value };
  } catch (error) {
    if (!(error instanceof ServingError)) {
      throw new Error(`threw a foreign error: ${describeError(error)}`, { cause: error });
    }
    if (!allowed.includes(error.code)) {
      throw new Error(
        `ServingError with code ${Code[error.code]} (allowed: ${allowed.map((c) => Code[c]).join(', ')}): ${error.message}`,
        { cause: error },
      );
    }
    return { ok: false, error };
  } finally {
    const elapsed = performance.now() - start;
    if (elapsed > HANG_MS) throw new Error(`took ${elapsed.toFixed(0)} ms (limit ${HANG_MS} ms)`);
  }
}

/** The asynchronous form of {@link outcome}; `timeoutMs` bounds the wait. */
export async function outcomeAsync<R>(
  fn: () => Promise<R>,
  allowed: readonly Code[] = [Code.INVALID_ARGUMENT],
  timeoutMs = 10_000,
): Promise<{ ok: true; value: R } | { ok: false; error: ServingError }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`did not settle within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  try {
    const value = await Promise.race([fn(), timeout]);
    return { ok: true, value };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('did not settle')) throw error;
    if (!(error instanceof ServingError)) {
      throw new Error(`rejected with a foreign error: ${describeError(error)}`, { cause: error });
    }
    if (!allowed.includes(error.code)) {
      throw new Error(
        `ServingError with code ${Code[error.code]} (allowed: ${allowed.map((c) => Code[c]).join(', ')}): ${error.message}`,
        { cause: error },
      );
    }
    return { ok: false, error };
  } finally {
    clearTimeout(timer);
  }
}

function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message.slice(0, 300)}`;
  return String(error).slice(0, 300);
}
