import type { Code } from '@visionserve/protocol';

/**
 * Lifecycle of one model version (TF Serving's ServableState):
 *
 *   START -> LOADING -> AVAILABLE -> UNLOADING -> END
 *                 \-> END (load failed; `error` is set)
 *
 * A version is only used for requests while AVAILABLE. UNLOADING waits until
 * every request that acquired the version has released it.
 */
export type ModelState = 'START' | 'LOADING' | 'AVAILABLE' | 'UNLOADING' | 'END';

export interface VersionStatus {
  readonly version: number;
  readonly state: ModelState;
  /** Set when loading failed (state END) or when unloading failed. */
  readonly error?: { readonly code: Code; readonly message: string } | undefined;
}
