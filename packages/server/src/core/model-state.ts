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
  /** Signatures of an AVAILABLE version that are not served, with the reason (partial load). */
  readonly unservedSignatures?: Readonly<Record<string, string>> | undefined;
}

/**
 * The status message of a version: its error, else the signatures it leaves out and why
 * (an AVAILABLE version that loaded partially keeps error code OK), else "".
 */
export function versionStatusMessage(status: VersionStatus): string {
  if (status.error !== undefined) return status.error.message;
  const unserved = Object.entries(status.unservedSignatures ?? {});
  if (unserved.length === 0) return '';
  return `Signatures not served: ${unserved.map(([name, why]) => `"${name}" ${why}`).join('; ')}`;
}
