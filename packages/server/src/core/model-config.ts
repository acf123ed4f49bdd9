/** Which versions found on disk are served (TF Serving's ServableVersionPolicy). */
export type VersionPolicy =
  | { readonly kind: 'latest'; readonly numVersions: number }
  | { readonly kind: 'all' }
  | { readonly kind: 'specific'; readonly versions: readonly number[] };

export const DEFAULT_VERSION_POLICY: VersionPolicy = { kind: 'latest', numVersions: 1 };

/** One entry of the model config list. */
export interface ModelConfig {
  readonly name: string;
  /** Directory holding numeric version directories. */
  readonly basePath: string;
  readonly versionPolicy: VersionPolicy;
  /** Label -> version. */
  readonly versionLabels: Readonly<Record<string, number>>;
  /**
   * Every file of the model must lie inside `basePath` (symlinks followed): set for models
   * a client loaded through a confined API. Default false (configured models are trusted).
   */
  readonly confined?: boolean | undefined;
}
