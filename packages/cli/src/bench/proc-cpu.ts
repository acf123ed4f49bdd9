import { readFile } from 'node:fs/promises';

/**
 * CPU time (user + system, all threads) a process has used so far, in ms, from
 * /proc/<pid>/stat (clock ticks assumed to be 100 Hz, Linux's USER_HZ). Undefined where
 * /proc is not available.
 */
export async function processCpuMs(pid: number): Promise<number | undefined> {
  try {
    const text = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return undefined;
  }
}

/** This process's CPU time so far (user + system, all threads), ms. */
export function ownCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
