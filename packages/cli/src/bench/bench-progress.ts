/** How suites report progress to whoever runs them (the CLI draws it on stderr). */

export interface BenchProgress {
  /** A new step (a block, a server start): counted and labelled; a line of its own when not on a terminal. */
  step(text: string): void;
  /** News within the current step (requests done): redrawn on a terminal, dropped elsewhere. */
  tick(text: string): void;
  /** A line of information (which server is starting, where the repository is). */
  log(line: string): void;
}

export const SILENT_PROGRESS: BenchProgress = {
  step: () => undefined,
  tick: () => undefined,
  log: () => undefined,
};
