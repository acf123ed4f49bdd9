/** Which versions found on disk are served (TF Serving's ServableVersionPolicy). */
export type VersionPolicy =
  | { readonly kind: 'latest'; readonly numVersions: number }
  | { readonly kind: 'all' }
  | { readonly kind: 'specific'; readonly versions: readonly number[] };

export const DEFAULT_VERSION_POLICY: VersionPolicy = { kind: 'latest', numVersions: 1 };

/**
 * TF Serving's per-model `logging_config`: a sample of requests and responses written as
 * PredictionLog records (core carries it; the request logger acts on it).
 */
export interface RequestLoggingConfig {
  /** Fraction of requests logged, 0..1 (`sampling_config.sampling_rate`). */
  readonly samplingRate: number;
  /** Files are written as `<filename_prefix>...` (`log_collector_config.filename_prefix`). */
  readonly filenamePrefix: string;
  /** `log_collector_config.type`; "" and "file" are the file collector. */
  readonly type: string;
}

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
  /** Request logging (`logging_config`); absent: none. */
  readonly logging?: RequestLoggingConfig | undefined;
}
