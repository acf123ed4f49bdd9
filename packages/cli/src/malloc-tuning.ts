/**
 * glibc malloc settings for large tensors. Out of the box glibc serves every allocation above
 * 32 MB (the most its adaptive mmap threshold reaches) with a fresh mmap and unmaps it on free,
 * so a 36 MB response buffer is paged in, page by page and zeroed by the kernel, on every
 * request: measured here, 20-25 ms of kernel CPU per 36 MB buffer, as much as the detector's
 * inference itself (onnxruntime-node's output copy, the socket's receive buffer). Raising the
 * mmap threshold keeps such buffers in the heap, where the next request reuses their pages;
 * the trim threshold bounds what a freed top of the main heap keeps before it goes back to
 * the system. Worker threads allocate from arenas of at most 64 MiB per heap: buffers up to
 * that size are reused there, larger ones are still mapped afresh.
 *
 * glibc reads these variables only at process start, and before 2.35 it refuses an mmap
 * threshold over 32 MiB (while the trim setting would still freeze the adaptive threshold at
 * 128 KiB: worse than the defaults), so they are set only on glibc >= 2.35, at process start:
 * `visionserve serve` and `npm start` started without them serve as a child that has them
 * (serveWithMallocTuning), the container image sets them, the benchmark sets them for every
 * process it starts, itself included. A value the user set wins; VISIONSERVE_MALLOC_TUNING=0 leaves
 * glibc's defaults.
 */
import { type SpawnOptions, spawn } from 'node:child_process';
import { serves } from './serve-args.js';

/** Allocations up to 128 MiB from the heap; a free main-heap top over 256 MiB is returned. */
export const MALLOC_TUNING: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: String(128 * 1024 * 1024),
  MALLOC_TRIM_THRESHOLD_: String(256 * 1024 * 1024),
};

/** The C library a decision is for: `glibc` is its version ("2.36"), absent for another one. */
export interface Libc {
  readonly glibc?: string;
}

let runningLibc: Libc | undefined;

/** The running process's C library (asked once: a diagnostic report takes about 5 ms). */
export function currentLibc(): Libc {
  if (runningLibc !== undefined) return runningLibc;
  if (process.platform !== 'linux') return (runningLibc = {});
  const header = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header;
  const glibc = header?.glibcVersionRuntime;
  runningLibc = glibc === undefined ? {} : { glibc };
  return runningLibc;
}

/** Whether this glibc accepts the settings (2.35 or newer). */
export function glibcTakesTuning(libc: Libc = currentLibc()): boolean {
  if (libc.glibc === undefined) return false;
  const [major, minor] = libc.glibc.split('.').map(Number);
  return major! > 2 || (major === 2 && minor! >= 35);
}

/** Whether `env` asks for the tuning, this glibc takes it, and the environment lacks it. */
export function wantsMallocTuning(env: NodeJS.ProcessEnv, libc: Libc = currentLibc()): boolean {
  if (env['VISIONSERVE_MALLOC_TUNING'] === '0' || !glibcTakesTuning(libc)) return false;
  return Object.keys(MALLOC_TUNING).some((name) => env[name] === undefined);
}

/**
 * Adds the tuning to this process's environment (where wantsMallocTuning), for launchers whose
 * children should run as `visionserve serve` runs itself: tests and benchmarks that start
 * servers, so that the process they start is the server and not a launcher.
 */
export function tuneEnvironment(env: NodeJS.ProcessEnv = process.env): void {
  Object.assign(env, withMallocTuning(env));
}

/** `env` with the tuning added where the user set nothing (when wantsMallocTuning). */
export function withMallocTuning(env: NodeJS.ProcessEnv, libc: Libc = currentLibc()): NodeJS.ProcessEnv {
  if (!wantsMallocTuning(env, libc)) return { ...env };
  return { ...MALLOC_TUNING, ...env };
}

/** How this process's allocator runs, for logs and benchmark reports. */
export function describeMallocTuning(env: NodeJS.ProcessEnv, libc: Libc = currentLibc()): string {
  const glibc = libc.glibc;
  if (glibc === undefined) return 'not glibc: the MALLOC_* settings do not apply';
  const set = Object.keys(MALLOC_TUNING).filter((name) => env[name] !== undefined);
  if (set.length === 0) {
    return `glibc ${glibc} defaults (buffers over 32 MB are mapped afresh for every use; docs/operations.md, "Memory allocator")`;
  }
  return `glibc ${glibc} with ${set.map((name) => `${name}=${env[name]!}`).join(' ')}`;
}

/**
 * V8 flags for a process that receives large answers (the benchmark's load generator and its
 * in-process path). V8 starts with a small old-generation allocation limit, and a fresh 36 MB
 * answer buffer pushes past it, so each answer brought a major collection: measured here, the
 * client's CPU per 34 MiB gRPC answer went from 33 to 20 ms with a larger initial limit. It
 * only moves where collections start; the heap still grows on demand.
 */
export const LARGE_ANSWER_V8_FLAGS: readonly string[] = ['--initial-old-space-size=256'];

/** A node flag's name in one spelling (V8 takes `_` and `-` alike): `--initial-old-space-size`. */
function flagName(arg: string): string {
  return arg.split('=')[0]!.replace(/_/g, '-');
}

/** Whether `execArgv` lacks one of `flags` in any spelling (node refuses them in NODE_OPTIONS). */
export function wantsV8Tuning(
  execArgv: readonly string[],
  flags: readonly string[] = LARGE_ANSWER_V8_FLAGS,
): boolean {
  return flags.some((flag) => !execArgv.some((a) => flagName(a) === flagName(flag)));
}

/** `execArgv` without LARGE_ANSWER_V8_FLAGS (in any spelling): for processes that stand for a server. */
export function withoutLargeAnswerFlags(execArgv: readonly string[]): string[] {
  const names = new Set(LARGE_ANSWER_V8_FLAGS.map(flagName));
  return execArgv.filter((a) => !names.has(flagName(a)));
}

/** Debugger flags are not passed on: the child would contend for the parent's inspector port. */
const NOT_PASSED_ON = /^--inspect(-brk|-port|-wait|-publish-uid)?(=|$)/;

/**
 * Set in a server's environment by serveWithMallocTuning: the server was started by a launcher
 * that waits on it, and stops when the launcher is gone (its IPC channel closes).
 */
export const LAUNCHED_ENV = 'VISIONSERVE_LAUNCHED';

/** How a child is run: passed-on signals, and how it is attached. */
interface Launch {
  readonly signals: readonly NodeJS.Signals[];
  /** Signals the launcher receives and ignores (the child got them already). */
  readonly ignored: readonly NodeJS.Signals[];
  readonly spawn: SpawnOptions;
}

/**
 * Runs node with `nodeArgs` as a child with `launch`'s options, passing the listed signals on;
 * resolves to the exit code to leave with, and re-raises a signal that killed the child.
 */
function runChild(nodeArgs: readonly string[], launch: Launch): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs, launch.spawn);
    const handlers = new Map<NodeJS.Signals, () => void>();
    for (const signal of launch.signals) handlers.set(signal, () => child.kill(signal));
    for (const signal of launch.ignored) handlers.set(signal, () => undefined);
    for (const [signal, handler] of handlers) process.on(signal, handler);
    const detach = (): void => {
      for (const [signal, handler] of handlers) process.off(signal, handler);
    };
    child.once('error', (error) => {
      detach();
      reject(error);
    });
    child.once('exit', (code, signal) => {
      detach();
      if (signal !== null) {
        process.kill(process.pid, signal);
        // Not reached for signals whose default action ends the process.
      }
      resolve(code ?? 1);
    });
  });
}

/** This process's node flags, less the debugger's (the child would contend for its port). */
function passedExecArgv(): string[] {
  return process.execArgv.filter((a) => !NOT_PASSED_ON.test(a));
}

/**
 * Runs `args` (a script and its arguments) in a child node process with the tuning in its
 * environment (glibc reads it only at start), passing stdio through; resolves to the exit
 * code to leave with, and re-raises a signal that killed the child. SIGTERM and SIGHUP are
 * passed on; SIGINT is not (a terminal sends it to the whole process group, the child
 * included, and a second one would cut a graceful stop short): this process only waits.
 */
export function runWithMallocTuning(
  args: readonly string[],
  v8Flags: readonly string[] = [],
): Promise<number> {
  const execArgv = passedExecArgv();
  const flags = v8Flags.filter((flag) => wantsV8Tuning(execArgv, [flag]));
  return runChild([...execArgv, ...flags, ...args], {
    signals: ['SIGTERM', 'SIGHUP'],
    ignored: ['SIGINT'],
    spawn: { stdio: 'inherit', env: withMallocTuning(process.env) },
  });
}

/**
 * Runs a server (`args`: the CLI script, `serve` and its flags) as a child with the tuning, for
 * `visionserve serve` and `npm start` started without it. The child runs in a session of its own
 * (`detached`: setsid, so also without a controlling terminal), so that a terminal's Ctrl-C
 * reaches this launcher only and is passed on once (SIGINT, SIGTERM, SIGHUP are passed on; two
 * Ctrl-C still stop at once, as for a server run directly). It gets an IPC channel and
 * LAUNCHED_ENV: when the launcher is gone (even by SIGKILL, also while the server still starts)
 * the channel closes and the server stops gracefully instead of living on unseen.
 */
export function serveWithMallocTuning(args: readonly string[]): Promise<number> {
  return runChild([...passedExecArgv(), ...args], {
    signals: ['SIGINT', 'SIGTERM', 'SIGHUP'],
    ignored: [],
    spawn: {
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
      detached: true,
      env: { ...withMallocTuning(process.env), [LAUNCHED_ENV]: '1' },
    },
  });
}

/**
 * In a server started by serveWithMallocTuning: calls `stop` once the launcher is gone (the
 * IPC channel closes), without the channel keeping the process alive. Nothing otherwise.
 */
export function stopWithLauncher(env: NodeJS.ProcessEnv, stop: () => void): () => void {
  if (env[LAUNCHED_ENV] !== '1') return () => undefined;
  const channel = process.channel;
  if (!process.connected || channel === undefined || channel === null) {
    // The launcher went while the server was starting (the channel is closed, or never was).
    const timer = setImmediate(stop);
    return () => {
      clearImmediate(timer);
    };
  }
  channel.unref();
  process.once('disconnect', stop);
  return () => {
    process.off('disconnect', stop);
  };
}

/**
 * For the benchmark, whose floors run in its own process and whose load generator receives
 * large answers: when this process lacks the malloc tuning or LARGE_ANSWER_V8_FLAGS, runs this
 * same command again with them and resolves to the exit code to leave with; undefined when
 * this process already runs as it should.
 */
export function rerunForBench(): Promise<number> | undefined {
  if (!wantsMallocTuning(process.env) && !wantsV8Tuning(process.execArgv)) return undefined;
  return runWithMallocTuning(process.argv.slice(1), LARGE_ANSWER_V8_FLAGS);
}

/**
 * For `visionserve serve` started without the tuning (glibc reads it only at start): serves as
 * a child with it (serveWithMallocTuning) and resolves to the exit code to leave with;
 * undefined when this process should serve itself: it has the tuning, is such a child, was
 * asked for help or the version, or runs under a debugger (whose inspector stays with the
 * process started: the server runs here, on glibc's defaults).
 */
export function rerunForServe(serveArgs: readonly string[]): Promise<number> | undefined {
  if (process.env[LAUNCHED_ENV] === '1' || !wantsMallocTuning(process.env) || !serves(serveArgs))
    return undefined;
  if (process.execArgv.some((a) => NOT_PASSED_ON.test(a))) return undefined;
  return serveWithMallocTuning(process.argv.slice(1)).catch((error: unknown) => {
    console.error(
      `visionserve: cannot start the server process: ${error instanceof Error ? error.message : String(error)}`,
    );
    return 1;
  });
}
