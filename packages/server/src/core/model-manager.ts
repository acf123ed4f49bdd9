import { join } from 'node:path';
import { Code, ServingError, invalidArgument, notFound, unavailable } from '@visionserve/protocol';
import type { Logger } from '../util/logger.js';
import type { ModelSpec } from './inference-service.js';
import type { ModelConfig } from './model-config.js';
import type { ModelRegistry } from './model-registry.js';
import type { VersionStatus } from './model-state.js';
import type { ModelSource, Session, SessionFactory } from './session.js';
import { type VersionEvent, VersionEntry, type VersionLoader } from './version-entry.js';
import { selectAspiredVersions } from './version-policy.js';
import { validateConfigs } from './validate-configs.js';

export type { VersionEvent } from './version-entry.js';

export interface ModelManagerOptions<A> {
  /** Loads one version's session; the runtime's (possibly batching-decorated) factory. */
  readonly sessionFactory: SessionFactory;
  /**
   * Reads a version's assets (labels, image settings, handler module) with its load; a
   * rejection fails the load like a broken model file. Default: no assets (undefined).
   */
  readonly loadAssets?: ((source: ModelSource) => Promise<A>) | undefined;
  /**
   * Versions present under a base path (the repository's `listVersions`).
   * A rejection is logged as a warning and the model keeps what it serves.
   */
  readonly listVersions: (basePath: string) => Promise<number[]>;
  /**
   * The directory of a version that listVersions just found (the repository's index maps
   * version 123 back to `<base>/00000123`). Default `<basePath>/<version>`.
   */
  readonly versionPath?: ((basePath: string, version: number) => string) | undefined;
  readonly logger: Logger;
  /** Told of every load, failed load, unload and asset refresh (metrics, caches keyed by version). */
  readonly onVersionEvent?: ((event: VersionEvent) => void) | undefined;
  /**
   * Lets `setModels` assign a *new* label to a version that is not AVAILABLE
   * (TF Serving's --allow_version_labels_for_unavailable_models).
   */
  readonly allowVersionLabelsForUnavailableModels: boolean;
  /**
   * How many times a failed load of a version is retried, on later `poll()`s,
   * before the version is given up (until its directory disappears from disk and
   * comes back) (TF Serving's --max_num_load_retries).
   */
  readonly maxLoadRetries: number;
  /**
   * Minimum time between a failed load and its retry, in milliseconds. A retry
   * happens on the first `poll()` after this interval (TF Serving's
   * --load_retry_interval_micros, in ms).
   */
  readonly loadRetryIntervalMs: number;
}

/**
 * One acquired model version: its session and the assets it was loaded with (or last
 * refreshed to) when acquired. The session stays open until every handle is released;
 * release exactly once (further calls are ignored), in a `finally`.
 */
export interface ServableHandle<A> {
  readonly name: string;
  readonly version: number;
  readonly session: Session;
  readonly assets: A;
  release(): void;
}

/**
 * Owns the served model versions (TF Serving's AspiredVersionsManager + ServerCore
 * label map). Concurrency: `setModels`, `addModel`, `removeModel`, `poll` and `close`
 * are serialised; at most one reconciliation runs at a time. `acquire` and `status`
 * are synchronous and may be called at any time.
 *
 * Availability is preserved: a new version, or every version under a changed base
 * path, is loaded and AVAILABLE before any version it replaces starts UNLOADING; if
 * every aspired version of a model fails to load, the versions it already serves keep
 * serving. A failed load never rejects `poll` or `addModel`; it leaves the version in END
 * with the error in its status (`setModels` reports new models that failed, see there).
 */
export interface ModelManager<A> extends ModelRegistry {
  /**
   * Replaces the configured model set: removed models unload (after in-flight
   * requests finish), new or changed models are reconciled against disk, and models
   * kept as they are get their assets re-read. Resolves when the resulting loads have
   * settled. Rejects with INVALID_ARGUMENT for an invalid config (nothing changes),
   * for assets that no longer read (the old ones keep serving) or for labels that point
   * at versions that are not AVAILABLE (models are still applied; the label maps stay
   * unchanged); UNKNOWN `N model(s) did not become available: {...}` (TF Serving's words)
   * when a new model, or a model whose base path changed, has no AVAILABLE version once
   * its loads settled (the set is applied all the same; polls keep retrying); UNAVAILABLE
   * after `close`.
   */
  setModels(configs: readonly ModelConfig[]): Promise<void>;
  /**
   * Rescans disk once for every configured model and loads / unloads to match
   * the version policies. Concurrent calls while one is queued share it. Never
   * rejects; a no-op after `close`.
   */
  poll(): Promise<void>;
  /**
   * The AVAILABLE version for a spec: latest (highest AVAILABLE), a specific
   * version or a label. Throws NOT_FOUND `Servable not found for request:
   * Latest(name)` / `Specific(name, 3)`, INVALID_ARGUMENT for an unknown label
   * or for both version and label, UNAVAILABLE once closing.
   */
  acquire(spec: ModelSpec): ServableHandle<A>;
  /** The version a label points at; INVALID_ARGUMENT `Unrecognized servable version label: X` if none. */
  resolveVersionLabel(name: string, label: string): number;
  /**
   * Status of all known versions of a configured model (newest first), or of one
   * version. NOT_FOUND for an unknown model or version.
   */
  status(name: string, version?: number): VersionStatus[];
  /** Configured model names, in config order. */
  modelNames(): string[];
  /** Resolves once every reconciliation queued so far has finished (initial load settled). */
  ready(): Promise<void>;
  /**
   * Stops accepting work, waits for the running reconciliation, then unloads
   * every version (each after its in-flight requests release it). Idempotent.
   */
  close(): Promise<void>;
}

type ManagerState = 'open' | 'closing' | 'closed';

interface ModelEntry<A> {
  config: ModelConfig;
  readonly versions: Map<number, VersionEntry<A>>;
  /** Label -> version, installed by setModels after validation. */
  labels: Readonly<Record<string, number>>;
  /**
   * The entry of the model's previous base path while the new one loads: it keeps
   * serving until a version under the new path is AVAILABLE, then unloads.
   */
  replaced: ModelEntry<A> | undefined;
}

/** The state of one manager, shared by the module-level functions below. */
function defaultVersionPath(basePath: string, version: number): string {
  return join(basePath, String(version));
}

/** The state of one manager, shared by the module-level functions below. */
interface Manager<A> {
  readonly options: ModelManagerOptions<A>;
  readonly logger: Logger;
  readonly loadAssets: (source: ModelSource) => Promise<A>;
  readonly loader: VersionLoader<A>;
  readonly emit: (event: VersionEvent) => void;
  state: ManagerState;
  /** In config order. */
  models: Map<string, ModelEntry<A>>;
  /** Tail of the reconciliation queue; never rejects. */
  tail: Promise<void>;
  /** A poll queued but not started yet; later polls join it. */
  queuedPoll: Promise<void> | undefined;
  readonly unloads: Set<Promise<void>>;
  closing: Promise<void> | undefined;
}

function serialize<A, T>(m: Manager<A>, task: () => Promise<T>): Promise<T> {
  const run = m.tail.then(task);
  m.tail = run.then(
    () => undefined,
    () => undefined,
  );
  return run;
}

function track<A>(m: Manager<A>, unload: Promise<void>): Promise<void> {
  m.unloads.add(unload);
  void unload.then(() => m.unloads.delete(unload));
  return unload;
}

function newEntry<A>(
  m: Manager<A>,
  model: ModelEntry<A>,
  version: number,
  attempts: number,
): VersionEntry<A> {
  const { name, basePath, confined } = model.config;
  const entry = new VersionEntry<A>(
    {
      modelName: name,
      version,
      path: (m.options.versionPath ?? defaultVersionPath)(basePath, version),
      basePath,
      confined,
    },
    attempts,
    m.logger.child({ model: name, version }),
    m.emit,
  );
  model.versions.set(version, entry);
  return entry;
}

function retryDue<A>(m: Manager<A>, entry: VersionEntry<A>): boolean {
  const { maxLoadRetries, loadRetryIntervalMs } = m.options;
  return entry.attempts <= maxLoadRetries && Date.now() - entry.failedAt >= loadRetryIntervalMs;
}

function unloadModel<A>(m: Manager<A>, model: ModelEntry<A>): Promise<void> {
  const all = [...model.versions.values()].map((v) => track(m, v.unload()));
  if (model.replaced !== undefined) all.push(unloadModel(m, model.replaced));
  return Promise.all(all).then(() => undefined);
}

/** The versions on disk, or undefined (logged) when they cannot be listed. */
async function versionsOnDisk<A>(m: Manager<A>, model: ModelEntry<A>): Promise<number[] | undefined> {
  const { name, basePath } = model.config;
  let onDisk: number[];
  try {
    onDisk = await m.options.listVersions(basePath);
  } catch (error) {
    m.logger.warn('Cannot list versions; keeping the versions already served', {
      model: name,
      basePath,
      error,
    });
    return undefined;
  }
  if (onDisk.length === 0) {
    m.logger.warn('No versions of servable found under base path', { model: name, basePath });
  }
  return onDisk;
}

/** Loads the aspired versions not loaded yet (and failed ones whose retry is due). */
async function loadAspired<A>(
  m: Manager<A>,
  model: ModelEntry<A>,
  aspired: readonly number[],
): Promise<void> {
  const loads: Promise<void>[] = [];
  for (const v of aspired) {
    const entry = model.versions.get(v);
    if (entry === undefined || (entry.state === 'END' && !entry.loadFailed)) {
      loads.push(newEntry(m, model, v, 1).load(m.loader));
    } else if (entry.state === 'END' && retryDue(m, entry)) {
      loads.push(newEntry(m, model, v, entry.attempts + 1).load(m.loader));
    }
    // An UNLOADING version that is aspired again is reloaded by a later poll.
  }
  await Promise.all(loads);
}

/** Unloads what is no longer aspired, once an aspired version serves (or none is aspired). */
function unloadUnaspired<A>(m: Manager<A>, model: ModelEntry<A>, aspired: readonly number[]): void {
  const { name } = model.config;
  const aspiredSet = new Set(aspired);
  const serving = [...model.versions.values()].filter((e) => e.available);
  const aspiredServing = serving.some((e) => aspiredSet.has(e.version));
  if (model.replaced !== undefined && (aspiredServing || aspired.length === 0)) {
    m.logger.info('Base path changed; unloading the versions of the previous path', { model: name });
    void unloadModel(m, model.replaced);
    model.replaced = undefined;
  }
  const stale = serving.filter((e) => !aspiredSet.has(e.version));
  if (stale.length === 0) return;
  if (aspired.length > 0 && !aspiredServing) {
    m.logger.warn('No aspired version is available; the previous versions keep serving', {
      model: name,
      aspired,
      serving: stale.map((e) => e.version),
    });
    return;
  }
  for (const e of stale) void track(m, e.unload());
}

/** Brings one model in line with its policy and what is on disk. Never rejects. */
async function reconcileModel<A>(m: Manager<A>, model: ModelEntry<A>): Promise<void> {
  const onDisk = await versionsOnDisk(m, model);
  if (onDisk === undefined) return;
  const present = new Set(onDisk);
  // A failed version whose directory vanished starts afresh if it comes back.
  for (const [v, entry] of model.versions) {
    if (entry.loadFailed && !present.has(v)) model.versions.delete(v);
  }
  const aspired = selectAspiredVersions(model.config.versionPolicy, onDisk);
  await loadAspired(m, model, aspired);
  unloadUnaspired(m, model, aspired);
}

/** Re-reads the assets of every AVAILABLE version of a kept model; the old ones stay on failure. */
async function refreshAssets<A>(m: Manager<A>, model: ModelEntry<A>): Promise<string[]> {
  const problems: string[] = [];
  for (const entry of model.versions.values()) {
    if (!entry.available) continue;
    try {
      entry.replaceAssets(await m.loadAssets(entry.source));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      m.logger.error('Cannot re-read model assets; keeping the previous ones', {
        model: model.config.name,
        version: entry.version,
        error,
      });
      problems.push(`Model ${model.config.name} version ${entry.version}: ${message}`);
    }
  }
  return problems;
}

/**
 * The entries of a new model set: kept models keep their entry (and get the new config),
 * new or moved ones get a fresh entry that replaces the old one once it serves. Models left
 * out start unloading.
 */
function nextModels<A>(
  m: Manager<A>,
  configs: readonly ModelConfig[],
): { next: Map<string, ModelEntry<A>>; kept: ModelEntry<A>[]; awaited: string[] } {
  const next = new Map<string, ModelEntry<A>>();
  const kept: ModelEntry<A>[] = [];
  const awaited: string[] = [];
  for (const config of configs) {
    const existing = m.models.get(config.name);
    if (existing !== undefined && existing.config.basePath === config.basePath) {
      existing.config = config;
      next.set(config.name, existing);
      kept.push(existing);
    } else {
      // A new model, or its base path moved: the new path loads while the old one serves.
      awaited.push(config.name);
      next.set(config.name, {
        config,
        versions: new Map(),
        labels: existing?.labels ?? {},
        replaced: existing,
      });
    }
  }
  for (const [name, model] of m.models) {
    if (!next.has(name)) {
      m.logger.info('Model removed from config; unloading', { model: name });
      void unloadModel(m, model);
    }
  }
  return { next, kept, awaited };
}

/** Labels of the configs that point at versions that are not AVAILABLE, as TF Serving words it. */
function labelProblems<A>(m: Manager<A>, configs: readonly ModelConfig[]): string[] {
  const allowUnavailableLabels = m.options.allowVersionLabelsForUnavailableModels;
  const problems: string[] = [];
  for (const config of configs) {
    const model = m.models.get(config.name)!;
    for (const [label, version] of Object.entries(config.versionLabels)) {
      const available = findVersion(model, version)?.available ?? false;
      const isNew = !Object.hasOwn(model.labels, label);
      if (!available && !(allowUnavailableLabels && isNew)) {
        problems.push(
          `Request to assign label ${label} to version ${version} of model ${config.name}, which is not currently available for inference`,
        );
      }
    }
  }
  return problems;
}

/** Installs a model set; returns why each new or moved model has no AVAILABLE version. */
async function applyModels<A>(m: Manager<A>, configs: readonly ModelConfig[]): Promise<string[]> {
  if (m.state !== 'open') throw unavailable('Model manager is closed');
  const { next, kept, awaited } = nextModels(m, configs);
  m.models = next;
  const [, refreshProblems] = await Promise.all([
    Promise.all([...m.models.values()].map((model) => reconcileModel(m, model))),
    Promise.all(kept.map((model) => refreshAssets(m, model))).then((lists) => lists.flat()),
  ]);
  const problems: string[] = [...refreshProblems, ...labelProblems(m, configs)];
  if (problems.length > 0) throw invalidArgument(problems.join('; '));
  for (const config of configs) m.models.get(config.name)!.labels = { ...config.versionLabels };
  // New models, and moved ones whose new path serves nothing (the old path may still
  // serve), for setModels to report.
  return awaited.flatMap((name) => {
    const model = m.models.get(name);
    const serving = [...(model?.versions.values() ?? [])].some((e) => e.available);
    return model === undefined || serving ? [] : [unavailableReason(model)];
  });
}

/** Why a model has no AVAILABLE version, in TF Serving's words. */
function unavailableReason<A>(model: ModelEntry<A>): string {
  const { name, basePath } = model.config;
  let latest: VersionEntry<A> | undefined;
  for (const entry of model.versions.values()) {
    if (latest === undefined || entry.version > latest.version) latest = entry;
  }
  if (latest === undefined) {
    return `{name: ${name}} due to error: No versions of servable ${name} found under base path ${basePath}`;
  }
  const error = latest.error === undefined ? '' : ` due to error: ${latest.error.message}`;
  return `{name: ${name} version: ${latest.version}}${error}`;
}

/** A version of the model, preferring the current base path over the one being replaced. */
function findVersion<A>(model: ModelEntry<A>, version: number): VersionEntry<A> | undefined {
  const current = model.versions.get(version);
  if (current?.available) return current;
  return model.replaced?.versions.get(version) ?? current;
}

function latestAvailable<A>(model: ModelEntry<A> | undefined): VersionEntry<A> | undefined {
  let best: VersionEntry<A> | undefined;
  for (const entry of model?.versions.values() ?? []) {
    if (entry.available && (best === undefined || entry.version > best.version)) best = entry;
  }
  return best ?? (model?.replaced === undefined ? undefined : latestAvailable(model.replaced));
}

function resolveVersionLabel<A>(m: Manager<A>, name: string, label: string): number {
  const labels = m.models.get(name)?.labels;
  if (labels !== undefined && Object.hasOwn(labels, label)) return labels[label]!;
  throw invalidArgument(`Unrecognized servable version label: ${label}`);
}

function handleFor<A>(name: string, entry: VersionEntry<A>): ServableHandle<A> {
  const { session, assets, release } = entry.acquire();
  return { name, version: entry.version, session, assets, release };
}

async function setModels<A>(m: Manager<A>, configs: readonly ModelConfig[]): Promise<void> {
  if (m.state !== 'open') throw unavailable('Model manager is closed');
  validateConfigs(configs);
  const snapshot = [...configs];
  const failed = await serialize(m, () => applyModels(m, snapshot));
  // As TF Serving's reload: the new set is in place (later polls keep retrying), but the
  // caller learns which new or moved models did not become available, and why.
  if (failed.length > 0) {
    throw new ServingError(
      Code.UNKNOWN,
      `${failed.length} model(s) did not become available: {${failed.map((u) => `{${u}}, `).join('')}}`,
    );
  }
}

async function addModel<A>(m: Manager<A>, config: ModelConfig): Promise<void> {
  if (m.state !== 'open') throw unavailable('Model manager is closed');
  validateConfigs([config]);
  await serialize(m, async () => {
    if (m.models.has(config.name)) {
      throw new ServingError(Code.ALREADY_EXISTS, `Model ${config.name} is already loaded`);
    }
    // The caller reads the new model's status (a failed load is not an error here).
    await applyModels(m, [...[...m.models.values()].map((model) => model.config), config]);
  });
}

async function removeModel<A>(m: Manager<A>, name: string): Promise<void> {
  if (m.state !== 'open') throw unavailable('Model manager is closed');
  // The queue only waits for the removal itself, not for in-flight requests to drain.
  const { drained } = await serialize(m, () => {
    const model = m.models.get(name);
    if (model === undefined) return Promise.reject(notFound(`Model ${name} is not loaded`));
    m.models.delete(name);
    m.logger.info('Model removed; unloading', { model: name });
    return Promise.resolve({ drained: unloadModel(m, model) });
  });
  await drained;
}

function poll<A>(m: Manager<A>): Promise<void> {
  if (m.state !== 'open') return Promise.resolve();
  if (m.queuedPoll !== undefined) return m.queuedPoll;
  const run = serialize(m, async () => {
    m.queuedPoll = undefined;
    if (m.state !== 'open') return;
    await Promise.all([...m.models.values()].map((model) => reconcileModel(m, model)));
  });
  m.queuedPoll = run;
  return run;
}

function acquire<A>(m: Manager<A>, spec: ModelSpec): ServableHandle<A> {
  if (m.state !== 'open') throw unavailable('Server is shutting down');
  const { name } = spec;
  if (spec.version !== undefined && spec.label !== undefined) {
    throw invalidArgument(
      `Both model version (${spec.version}) and model version label (${spec.label}) cannot be supplied.`,
    );
  }
  const version = spec.label !== undefined ? resolveVersionLabel(m, name, spec.label) : spec.version;
  const model = m.models.get(name);
  if (version !== undefined) {
    const entry = model === undefined ? undefined : findVersion(model, version);
    if (entry === undefined || !entry.available) {
      throw notFound(`Servable not found for request: Specific(${name}, ${version})`);
    }
    return handleFor(name, entry);
  }
  const best = latestAvailable(model);
  if (best === undefined) throw notFound(`Servable not found for request: Latest(${name})`);
  return handleFor(name, best);
}

function status<A>(m: Manager<A>, name: string, version: number | undefined): VersionStatus[] {
  const model = m.models.get(name);
  if (model === undefined) throw notFound(`Could not find any versions of model ${name}`);
  const byVersion = new Map<number, VersionEntry<A>>();
  for (const e of model.replaced?.versions.values() ?? []) byVersion.set(e.version, e);
  for (const e of model.versions.values()) {
    if (e.available || !(byVersion.get(e.version)?.available ?? false)) byVersion.set(e.version, e);
  }
  const entries = [...byVersion.values()]
    .filter((e) => version === undefined || e.version === version)
    .sort((a, b) => b.version - a.version);
  if (entries.length === 0) {
    throw notFound(
      version === undefined
        ? `Could not find any versions of model ${name}`
        : `Could not find version ${version} of model ${name}`,
    );
  }
  return entries.map((e) => e.status());
}

function close<A>(m: Manager<A>): Promise<void> {
  m.closing ??= (async () => {
    m.state = 'closing';
    await m.tail;
    for (const model of m.models.values()) void unloadModel(m, model);
    while (m.unloads.size > 0) await Promise.all([...m.unloads]);
    m.state = 'closed';
  })();
  return m.closing;
}

export function createModelManager<A = undefined>(options: ModelManagerOptions<A>): ModelManager<A> {
  const { sessionFactory } = options;
  const loadAssets = options.loadAssets ?? (() => Promise.resolve(undefined as A));
  const m: Manager<A> = {
    options,
    logger: options.logger,
    loadAssets,
    loader: async (source) => {
      const assets = await loadAssets(source);
      return { session: await sessionFactory.load(source), assets };
    },
    emit: (event) => {
      options.onVersionEvent?.(event);
    },
    state: 'open',
    models: new Map(),
    tail: Promise.resolve(),
    queuedPoll: undefined,
    unloads: new Set(),
    closing: undefined,
  };
  return {
    setModels: (configs) => setModels(m, configs),
    modelConfig: (name) => m.models.get(name)?.config,
    addModel: (config) => addModel(m, config),
    removeModel: (name) => removeModel(m, name),
    poll: () => poll(m),
    acquire: (spec) => acquire(m, spec),
    resolveVersionLabel: (name, label) => resolveVersionLabel(m, name, label),
    status: (name, version) => status(m, name, version),
    modelNames: () => [...m.models.keys()],
    ready: () => m.tail,
    close: () => close(m),
  };
}
