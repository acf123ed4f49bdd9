/**
 * Clean-up that must happen however a benchmark run ends. The run's own `finally` closes
 * servers and removes temporary folders on return and on errors; this covers the ends that
 * skip `finally`: SIGINT (Ctrl-C), SIGTERM, SIGHUP and `process.exit`. Actions are
 * synchronous (a signal handler cannot wait), e.g. `rmSync` of a folder or `process.kill`
 * of a child.
 */

export interface ExitCleanup {
  /** Registers a synchronous action; the returned function unregisters it (once done normally). */
  add(action: () => void): () => void;
  /** Runs every registered action now, once each (errors are ignored), and unregisters them. */
  runAll(): void;
  /** Removes the signal and exit handlers (call when the run is over). */
  dispose(): void;
}

export interface ExitCleanupOptions {
  /** Signals that run the actions, then end the process as the signal would. Default SIGINT, SIGTERM, SIGHUP. */
  readonly signals?: readonly NodeJS.Signals[];
}

export function createExitCleanup(options: ExitCleanupOptions = {}): ExitCleanup {
  const signals = options.signals ?? ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const actions = new Set<() => void>();
  const runAll = (): void => {
    const list = [...actions].reverse();
    actions.clear();
    for (const action of list) {
      try {
        action();
      } catch {
        // Best effort: the process is going away.
      }
    }
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    runAll();
    dispose();
    // Without our handler the signal's default action applies (exit 128 + n), unless
    // someone else listens for it.
    process.kill(process.pid, signal);
  };
  const onExit = (): void => {
    runAll();
  };
  const dispose = (): void => {
    for (const s of signals) process.off(s, onSignal);
    process.off('exit', onExit);
  };
  for (const s of signals) process.on(s, onSignal);
  process.on('exit', onExit);
  return {
    add(action) {
      actions.add(action);
      return () => {
        actions.delete(action);
      };
    },
    runAll,
    dispose,
  };
}
