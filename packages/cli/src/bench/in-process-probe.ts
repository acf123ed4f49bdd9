/**
 * The "in-process" benchmark path: a child process that runs the server's core
 * (InferenceService over the worker-thread runtime, no listeners) and calls
 * `service.predict` directly, with the same load loops as the network paths. It measures
 * everything but the transport and the wire formats.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { type Tensor } from '@visionserve/protocol';
import { withoutLargeAnswerFlags } from '../malloc-tuning.js';
import type { ExitCleanup } from './exit-cleanup.js';
import type { LoopResult } from './load-loop.js';

export interface ProbeBlock {
  readonly model: string;
  readonly inputs: Readonly<Record<string, Tensor>>;
  readonly mode: 'closed' | 'open';
  readonly concurrency: number;
  readonly ratePerSecond: number;
  readonly warmup: number;
  readonly durationMs: number;
  readonly minRequests: number;
  readonly maxRequests: number;
}

export interface ProbeResult extends LoopResult {
  /** CPU time of the probe process during the block (its server work and its load loop), ms. */
  readonly cpuMs: number;
  /** Bytes of the output tensors of the last answer. */
  readonly outputBytes: number;
}

export type ToProbe = { readonly type: 'run'; readonly block: ProbeBlock } | { readonly type: 'exit' };
export type FromProbe =
  | { readonly type: 'ready' }
  | { readonly type: 'result'; readonly result: ProbeResult }
  | { readonly type: 'failed'; readonly message: string };

export interface InProcessProbe {
  readonly pid: number;
  run(block: ProbeBlock): Promise<ProbeResult>;
  close(): Promise<void>;
}

const CHILD = new URL('./in-process-probe-child.js', import.meta.url);

/**
 * Forks the probe with the server flags it should load its models with; resolves once they
 * are loaded. With `cleanup`, the child is sent SIGTERM if this process is interrupted.
 */
export function startInProcessProbe(
  serverArgs: readonly string[],
  cleanup?: ExitCleanup,
): Promise<InProcessProbe> {
  const child: ChildProcess = fork(CHILD, [...serverArgs], {
    // The node flags the servers get (none): not the load generator's flags for large answers.
    execArgv: withoutLargeAnswerFlags(process.execArgv),
    serialization: 'advanced',
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const pid = child.pid;
  if (cleanup && pid !== undefined) {
    const unregister = cleanup.add(() => {
      process.kill(pid, 'SIGTERM');
    });
    child.once('exit', unregister);
  }
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  const next = (): Promise<FromProbe> =>
    new Promise((resolve, reject) => {
      const onMessage = (message: FromProbe): void => {
        child.off('exit', onExit);
        resolve(message);
      };
      const onExit = (code: number | null): void => {
        child.off('message', onMessage);
        reject(new Error(`in-process probe exited with code ${String(code)}: ${stderr}`));
      };
      child.once('message', onMessage);
      child.once('exit', onExit);
    });
  return next().then((first) => {
    if (first.type !== 'ready') {
      child.kill('SIGKILL');
      throw new Error(
        `in-process probe failed to start: ${first.type === 'failed' ? first.message : first.type}`,
      );
    }
    return {
      pid: child.pid!,
      async run(block) {
        const answer = next();
        child.send({ type: 'run', block } satisfies ToProbe);
        const message = await answer;
        if (message.type !== 'result')
          throw new Error(`in-process probe: ${message.type === 'failed' ? message.message : message.type}`);
        return message.result;
      },
      close: () =>
        new Promise<void>((done) => {
          if (child.exitCode !== null) {
            done();
            return;
          }
          child.once('exit', () => {
            done();
          });
          child.send({ type: 'exit' } satisfies ToProbe);
        }),
    };
  });
}
