/**
 * CPU pinning for the overload test (Linux `taskset`, util-linux): the server can be
 * started on some cores and the load generator moved to others, so that they do not take
 * each other's CPU time. Both are optional; without `taskset` the run fails with a clear message.
 */
import { execFileSync } from 'node:child_process';

/** The command prefix that starts a process on `cpus` (a taskset list such as "0" or "0,1"). */
export function pinnedCommand(cpus: string): string[] {
  return ['taskset', '--cpu-list', cpus];
}

/** A CPU list as taskset takes it: numbers and ranges, comma-separated. */
export function isCpuList(text: string): boolean {
  return /^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(text);
}

/**
 * Moves every thread of this process to `cpus`; returns a function that restores the
 * previous affinity.
 */
export function pinThisProcess(cpus: string): () => void {
  const pid = String(process.pid);
  let before: string;
  try {
    before =
      /:\s*([0-9a-f]+)\s*$/i.exec(execFileSync('taskset', ['-p', pid], { encoding: 'utf8' }))?.[1] ?? '';
  } catch (error) {
    throw new Error(`cannot pin the load generator: taskset failed (${String(error)})`);
  }
  execFileSync('taskset', ['--all-tasks', '--pid', '--cpu-list', cpus, pid], { stdio: 'ignore' });
  return () => {
    if (before === '') return;
    try {
      execFileSync('taskset', ['--all-tasks', '--pid', before, pid], { stdio: 'ignore' });
    } catch {
      // Best effort: the run is over.
    }
  };
}
