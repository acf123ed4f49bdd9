/**
 * glibc malloc settings for large tensors. Out of the box glibc serves every allocation above
 * 32 MB (the most its adaptive mmap threshold reaches) with a fresh mmap and unmaps it on free,
 * so a 36 MB response buffer is paged in, page by page and zeroed by the kernel, on every
 * request: measured here, 20-25 ms of kernel CPU per 36 MB buffer, as much as the detector's
 * inference itself (onnxruntime-node's output copy, the socket's receive buffer). Raising the
 * mmap threshold keeps such buffers in the heap, where the next request reuses their pages;
 * the trim threshold bounds what a freed heap top keeps before it goes back to the system.
 *
 * glibc reads these variables only at process start: launchers set them (`npm start`, the
 * container image, the benchmark for every process it starts, itself included). A value the
 * user set wins; VISIONSERVE_MALLOC_TUNING=0 leaves glibc's defaults. Other C libraries
 * (musl) ignore the variables.
 */
import { spawn } from 'node:child_process';

/** The settings: heap for allocations up to 1 GiB, a free heap top over 256 MiB is returned. */
export const MALLOC_TUNING: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: String(1024 * 1024 * 1024),
  MALLOC_TRIM_THRESHOLD_: String(256 * 1024 * 1024),
};

/** Whether `env` asks for the tuning and does not have it yet. */
export function wantsMallocTuning(env: NodeJS.ProcessEnv): boolean {
  if (env['VISIONSERVE_MALLOC_TUNING'] === '0' || process.platform !== 'linux') return false;
  return Object.keys(MALLOC_TUNING).some((name) => env[name] === undefined);
}

/** `env` with the tuning added where the user set nothing (unless VISIONSERVE_MALLOC_TUNING=0). */
export function withMallocTuning(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (env['VISIONSERVE_MALLOC_TUNING'] === '0') return { ...env };
  return { ...MALLOC_TUNING, ...env };
}

/** How this process's allocator runs, for logs and benchmark reports. */
export function describeMallocTuning(env: NodeJS.ProcessEnv): string {
  const set = Object.keys(MALLOC_TUNING).filter((name) => env[name] !== undefined);
  if (set.length === 0) {
    return 'glibc defaults (buffers over 32 MB are mapped afresh for every request; see README "Configuration")';
  }
  return set.map((name) => `${name}=${env[name]!}`).join(' ');
}

/**
 * Runs this same command again in a child process with the tuning in its environment (glibc
 * reads it only at start), passing stdio through, and resolves to its exit code. For batch
 * commands (the benchmark), not for `serve`, whose process id supervisors and probes watch.
 */
export function rerunWithMallocTuning(): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: withMallocTuning(process.env),
    });
    // Ctrl-C reaches the whole process group: the child cleans up and exits; this one waits for it.
    const ignore = (): void => undefined;
    process.on('SIGINT', ignore);
    process.on('SIGTERM', ignore);
    const forwardTerm = (): void => {
      child.kill('SIGTERM');
    };
    process.on('SIGTERM', forwardTerm);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      process.off('SIGINT', ignore);
      process.off('SIGTERM', ignore);
      process.off('SIGTERM', forwardTerm);
      resolve(code ?? (signal !== null ? 1 : 0));
    });
  });
}
