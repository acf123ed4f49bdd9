/** The console's calls to its own server (same origin; paths relative to the console page). */

export interface TensorSpecJson {
  readonly name: string;
  readonly dtype: string;
  readonly shape: readonly number[];
}

export interface SignatureJson {
  readonly inputs: Readonly<Record<string, TensorSpecJson>>;
  readonly outputs: Readonly<Record<string, TensorSpecJson>>;
  readonly methodName: string;
}

export interface VersionJson {
  readonly version: number;
  readonly state: string;
  readonly error: { readonly code: string; readonly message: string } | null;
  readonly since: string | null;
  readonly loadMs?: number;
  readonly signatures?: Readonly<Record<string, SignatureJson>>;
  readonly assets?: {
    readonly image: Readonly<Record<string, unknown>> | null;
    readonly postprocess: Readonly<Record<string, unknown>> | null;
    readonly handler: string | null;
  };
  readonly labels?: number | null;
}

export interface ModelJson {
  readonly name: string;
  /** Null unless the caller may manage models (the admin token, when one is set). */
  readonly basePath: string | null;
  readonly versionPolicy: unknown;
  readonly versionLabels: Readonly<Record<string, number>>;
  readonly batching: {
    readonly enabled: boolean;
    readonly maxBatchSize?: number;
    readonly instances: number;
  };
  readonly versions: readonly VersionJson[];
}

/** The console page lives at <console>/; its API at <console>/api/. */
export const API = 'api';

/** The admin token the Manage view keeps for this tab (sent where the server asks for it). */
export function adminToken(): string {
  return sessionStorage.getItem('visionserve-admin-token') ?? '';
}

export async function getJson<T>(path: string, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(path, { headers });
  const text = await res.text();
  if (!res.ok) {
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: string }).error ?? text;
    } catch {
      // Not JSON.
    }
    throw new Error(`${res.status}: ${message}`);
  }
  return JSON.parse(text) as T;
}

export async function models(): Promise<ModelJson[]> {
  // Base paths come only to callers that may manage models.
  const token = adminToken();
  const headers: Record<string, string> = token === '' ? {} : { Authorization: `Bearer ${token}` };
  return (await getJson<{ models: ModelJson[] }>(`${API}/models`, headers)).models;
}

/** The version requests would reach now: the highest AVAILABLE one. */
export function servingVersion(model: ModelJson): VersionJson | undefined {
  return model.versions.filter((v) => v.state === 'AVAILABLE').sort((a, b) => b.version - a.version)[0];
}

export function defaultSignature(version: VersionJson | undefined): SignatureJson | undefined {
  return version?.signatures?.['serving_default'] ?? Object.values(version?.signatures ?? {})[0];
}
