import type { OutputLease } from './session.js';

export interface ReleasableOutputLease extends OutputLease {
  /** Runs every registered release (once); later `hold`s release at once. */
  release(): void;
}

/**
 * An OutputLease for one call. The owner must call `release` exactly when nothing reads the
 * call's outputs any more (the response has been written to the socket, or the call
 * failed): until then the pooled memory they live in is not reused.
 */
export function createOutputLease(): ReleasableOutputLease {
  let releases: (() => void)[] | undefined = [];
  return {
    hold(release) {
      if (releases === undefined) release();
      else releases.push(release);
    },
    release() {
      const pending = releases;
      releases = undefined;
      for (const r of pending ?? []) r();
    },
  };
}
