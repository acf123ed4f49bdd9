/**
 * Starts `visionserve serve` as a child process on ephemeral loopback ports for the
 * benchmark (the load generator must not share a process with the server).
 */
import { appendFileSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ExitCleanup } from './exit-cleanup.js';
import { type GcTotals, createGcTrace } from './server-gc.js';

const CLI = fileURLToPath(new URL('../../../bin/visionserve.js', import.meta.url));

export interface ServerProcess {
  readonly pid: number;
  readonly grpcPort: number;
  readonly restPort: number;
  /** Undefined when the server has no SageMaker-style listener (frontend not present). */
  readonly sagemakerPort: number | undefined;
  /** Garbage collection in the server so far (it runs with `--trace-gc`), every isolate. */
  readonly gc: () => GcTotals;
  stop(): Promise<void>;
}

export interface StartServerOptions {
  /** Time to "ready", ms. Default 60000. */
  readonly startTimeoutMs?: number;
  readonly cleanup?: ExitCleanup;
  /**
   * A command that execs the server in its own process, e.g. `['taskset', '--cpu-list', '0']`
   * (the pid stays the server's). Default: none.
   */
  readonly prefix?: readonly string[];
}

/**
 * Resolves once the server logged "visionserve ready" (on stderr; its stdout carries V8's
 * `--trace-gc` lines, which are counted); rejects if it exits first or after
 * `startTimeoutMs` (then it is killed). With `cleanup`, the child is sent SIGTERM if this
 * process is interrupted while the child runs.
 */
export function startServerProcess(
  extraArgs: readonly string[],
  options: StartServerOptions = {},
): Promise<ServerProcess> {
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const prefix = options.prefix ?? [];
  return new Promise((resolve, reject) => {
    const proc: ChildProcess = spawn(
      prefix[0] ?? process.execPath,
      [
        ...(prefix.length > 0 ? [...prefix.slice(1), process.execPath] : []),
        '--trace-gc',
        CLI,
        'serve',
        '--host=127.0.0.1',
        '--port=0',
        '--rest_api_port=0',
        '--sagemaker_port=0',
        '--file_system_poll_wait_seconds=0',
        '--log_level=info',
        ...extraArgs,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const pid = proc.pid;
    const unregister =
      options.cleanup && pid !== undefined
        ? options.cleanup.add(() => {
            process.kill(pid, 'SIGTERM');
          })
        : () => undefined;
    proc.once('exit', unregister);
    let log = '';
    let ready = false;
    const gc = createGcTrace();
    proc.stdout?.setEncoding('utf8');
    proc.stdout?.on('data', (chunk: string) => {
      gc.feed(chunk);
    });
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not become ready within ${startTimeoutMs} ms:\n${log.slice(-2000)}`));
    }, startTimeoutMs);
    const onData = (chunk: Buffer | string): void => {
      if (ready) return;
      log += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      for (const line of log.split('\n')) {
        if (!line.includes('"visionserve ready"')) continue;
        let record: { grpc?: number; rest?: number; sagemaker?: number };
        try {
          record = JSON.parse(line) as typeof record;
        } catch {
          continue;
        }
        ready = true;
        clearTimeout(timer);
        proc.stderr?.off('data', onData);
        const keep = process.env['VISIONSERVE_BENCH_SERVER_LOG'];
        if (keep !== undefined && keep !== '') {
          proc.stderr?.on('data', (c: Buffer | string) => {
            appendFileSync(keep, c);
          });
        }
        proc.stderr?.resume();
        proc.removeAllListeners('exit');
        proc.once('exit', unregister);
        resolve({
          pid: proc.pid!,
          grpcPort: record.grpc!,
          restPort: record.rest!,
          sagemakerPort: record.sagemaker,
          gc: () => gc.totals(),
          stop: () =>
            new Promise<void>((done) => {
              if (proc.exitCode !== null || proc.signalCode !== null) {
                done();
                return;
              }
              proc.once('exit', () => {
                done();
              });
              proc.kill('SIGTERM');
            }),
        });
        return;
      }
    };
    proc.stderr?.on('data', onData);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      if (!ready)
        reject(
          new Error(`server exited with code ${String(code)} before it was ready:\n${log.slice(-2000)}`),
        );
    });
  });
}
