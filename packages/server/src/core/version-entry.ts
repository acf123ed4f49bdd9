import { Code, ServingError } from '@visionserve/protocol';
import type { Logger } from '../util/logger.js';
import type { ModelState, VersionStatus } from './model-state.js';
import type { ModelSource, Session } from './session.js';

/** What one load produces: the runnable session and the version's assets. */
export interface LoadedVersion<A> {
  readonly session: Session;
  readonly assets: A;
}

/** How a version is loaded: the composition root's session factory chain plus the asset reader. */
export type VersionLoader<A> = (source: ModelSource) => Promise<LoadedVersion<A>>;

/** A lifecycle event, for metrics and for components that cache per-version state. */
export type VersionEvent =
  | {
      readonly type: 'loaded' | 'load-failed' | 'unloaded';
      readonly model: string;
      readonly version: number;
      readonly basePath: string;
      /** Time the transition took, in ms (loading, or unloading including the wait for in-flight requests). */
      readonly durationMs: number;
      readonly error?: VersionStatus['error'];
    }
  | {
      readonly type: 'assets-refreshed';
      readonly model: string;
      readonly version: number;
      readonly basePath: string;
    };

/**
 * One version of one model and its lifecycle (TF Serving's ServableState):
 *
 *   START -> LOADING -> AVAILABLE -> UNLOADING -> END
 *                 \-> END (load failed; `error` is set)
 *
 * Transitions happen only through `load` and `unload`; `acquire` is allowed only while
 * AVAILABLE and pins the session and the assets current at that moment. Unloading waits
 * until every acquisition has been released, then closes the session.
 */
export class VersionEntry<A> {
  state: ModelState = 'START';
  error: VersionStatus['error'];
  /** True when the last load attempt failed (state END). */
  loadFailed = false;
  /** Load attempts made since the version (re)appeared on disk. */
  attempts: number;
  /** Date.now() of the last failed load. */
  failedAt = 0;
  private session: Session | undefined;
  private current: A | undefined;
  private refs = 0;
  private onDrained: (() => void) | undefined;
  private unloading: Promise<void> | undefined;

  constructor(
    readonly source: ModelSource,
    attempts: number,
    private readonly log: Logger,
    private readonly emit: (event: VersionEvent) => void,
  ) {
    this.attempts = attempts;
  }

  get version(): number {
    return this.source.version;
  }

  get available(): boolean {
    return this.state === 'AVAILABLE' && this.session !== undefined;
  }

  /** START -> LOADING -> AVAILABLE, or END with the error. Never rejects. */
  async load(loader: VersionLoader<A>): Promise<void> {
    const { modelName: name, version, basePath } = this.source;
    this.state = 'LOADING';
    const started = performance.now();
    this.log.info('Loading servable version', { path: this.source.path, attempt: this.attempts });
    try {
      const loaded = await loader(this.source);
      this.session = loaded.session;
      this.current = loaded.assets;
      this.state = 'AVAILABLE';
      this.log.info('Servable version available');
      this.emit({ type: 'loaded', model: name, version, basePath, durationMs: performance.now() - started });
    } catch (error) {
      this.state = 'END';
      this.loadFailed = true;
      this.failedAt = Date.now();
      this.error = statusError(error, `Loading servable: {name: ${name} version: ${version}}`);
      this.log.error('Failed to load servable version', { error, attempt: this.attempts });
      this.emit({
        type: 'load-failed',
        model: name,
        version,
        basePath,
        durationMs: performance.now() - started,
        error: this.error,
      });
    }
  }

  /** Replaces the assets new acquisitions see; acquisitions already made keep theirs. */
  replaceAssets(assets: A): void {
    this.current = assets;
    const { modelName: model, version, basePath } = this.source;
    this.emit({ type: 'assets-refreshed', model, version, basePath });
  }

  /** Pins the session and assets until `release`. Only while AVAILABLE. */
  acquire(): { session: Session; assets: A; release: () => void } {
    const session = this.session;
    if (!this.available || session === undefined)
      throw new Error('acquire of a version that is not AVAILABLE');
    this.refs++;
    let released = false;
    return {
      session,
      assets: this.current as A,
      release: () => {
        if (released) return;
        released = true;
        this.refs--;
        if (this.refs === 0 && this.onDrained !== undefined) {
          const drained = this.onDrained;
          this.onDrained = undefined;
          drained();
        }
      },
    };
  }

  /**
   * AVAILABLE -> UNLOADING -> (every acquisition released) -> close -> END. Idempotent;
   * resolves when the version has reached END (at once for a version that is not AVAILABLE).
   */
  unload(): Promise<void> {
    if (this.unloading !== undefined) return this.unloading;
    if (this.state !== 'AVAILABLE') return Promise.resolve();
    this.state = 'UNLOADING';
    const { modelName: model, version, basePath } = this.source;
    this.log.info('Unloading servable version', { inFlight: this.refs });
    const started = performance.now();
    this.unloading = (async (): Promise<void> => {
      if (this.refs > 0) {
        await new Promise<void>((resolve) => {
          this.onDrained = resolve;
        });
      }
      const session = this.session;
      this.session = undefined;
      try {
        await session?.close();
      } catch (error) {
        this.error = statusError(error, `Unloading servable: {name: ${model} version: ${version}}`);
        this.log.error('Failed to close servable version', { error });
      }
      this.state = 'END';
      this.log.info('Servable version unloaded');
      this.emit({ type: 'unloaded', model, version, basePath, durationMs: performance.now() - started });
    })();
    return this.unloading;
  }

  status(): VersionStatus {
    return {
      version: this.version,
      state: this.state,
      ...(this.error === undefined ? {} : { error: this.error }),
      ...(this.state === 'AVAILABLE' && this.session?.unservedSignatures !== undefined
        ? { unservedSignatures: this.session.unservedSignatures }
        : {}),
    };
  }
}

function statusError(error: unknown, what: string): { code: Code; message: string } {
  if (error instanceof ServingError) return { code: error.code, message: error.message };
  const detail = error instanceof Error ? error.message : String(error);
  return { code: Code.UNKNOWN, message: `${what} failed: ${detail}` };
}
