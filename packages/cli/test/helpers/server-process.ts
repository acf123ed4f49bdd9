import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { withMallocTuning } from '../../src/malloc-tuning.js';
import { REPO_ROOT } from './shared.js';

export const CLI = join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js');

/** A `visionserve serve` child process on loopback ephemeral ports. */
export interface ServerProcess {
  readonly child: ChildProcess;
  readonly ports: { grpc?: number | undefined; rest?: number | undefined; sagemaker?: number | undefined };
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (or signal name) and the time it exited (Date.now()). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/**
 * Starts `visionserve serve` with the given flags (plus loopback host and port 0 for every
 * listener unless given) and resolves once it logs `visionserve ready`; rejects with its
 * output if it exits first or is not ready within `timeoutMs`.
 */
export async function startServerProcess(
  flags: readonly string[],
  timeoutMs = 60_000,
): Promise<ServerProcess> {
  const defaults = ['--host=127.0.0.1', '--port=0', '--rest_api_port=0', '--sagemaker_port=-1'];
  const given = new Set(flags.map((f) => f.split('=', 1)[0]));
  const args = [CLI, 'serve', ...defaults.filter((d) => !given.has(d.split('=', 1)[0])), ...flags];
  // With the malloc settings, as `visionserve serve` runs itself: the server is this process
  // (without them it would be a launcher's child, and signals and /proc readings would miss it).
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: withMallocTuning(process.env),
  });
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (text += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (text += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>(
    (resolve) => {
      child.once('exit', (code, signal) => {
        resolve({ code, signal, at: Date.now() });
      });
    },
  );
  const ports = await new Promise<ServerProcess['ports']>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server not ready within ${timeoutMs} ms:\n${text}`));
    }, timeoutMs);
    const onData = (): void => {
      // Whole lines only: a chunk may end in the middle of the ready line.
      for (const line of text.split('\n').slice(0, -1)) {
        if (!line.includes('"visionserve ready"')) continue;
        clearTimeout(timer);
        child.stdout.off('data', onData);
        child.stderr.off('data', onData);
        const ready = JSON.parse(line) as { grpc?: number; rest?: number; sagemaker?: number; pid?: number };
        if (ready.pid !== child.pid) {
          child.kill('SIGKILL');
          reject(new Error(`the server is process ${ready.pid}, not the one started (${child.pid})`));
          return;
        }
        resolve({ grpc: ready.grpc, rest: ready.rest, sagemaker: ready.sagemaker });
        return;
      }
    };
    // The JSON log goes to stderr.
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before it was ready:\n${text}`));
    });
  });
  return { child, ports, output: () => text, exited };
}
