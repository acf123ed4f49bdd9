/**
 * `manifest.json` of a SavedModel conversion (written by python/savedmodel_to_onnx.py) and
 * the ModelFiles it gives the runtime.
 */
import { join } from 'node:path';
import { Code, type ExampleFeatureSpec, ServingError, isDType } from '@visionserve/protocol';
import type { DeclaredTensor, ModelFiles, SignatureFile } from '../contracts/model-files.js';

/** One signature as the converter reports it. */
export interface ConvertedSignature {
  readonly status: 'ok' | 'unsupported' | 'error';
  readonly methodName: string;
  readonly inputs: Readonly<Record<string, DeclaredTensor>>;
  readonly outputs: Readonly<Record<string, DeclaredTensor>>;
  /** ONNX file relative to the conversion directory (status ok). */
  readonly onnx?: string | undefined;
  readonly examples?:
    { readonly inputKey: string; readonly features: readonly ExampleFeatureSpec[] } | undefined;
  /** TensorFlow ops with no ONNX equivalent (status unsupported). */
  readonly unsupportedOps?: readonly string[] | undefined;
  readonly error?: string | undefined;
}

export interface ConversionManifest {
  /** Versions of Python, TensorFlow, tf2onnx and onnx that converted it. */
  readonly converter: Readonly<Record<string, string>>;
  readonly signatures: Readonly<Record<string, ConvertedSignature>>;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function bad(what: string): never {
  throw new Error(`invalid conversion manifest: ${what}`);
}

function tensors(value: unknown, what: string): Record<string, DeclaredTensor> {
  if (!isObject(value)) bad(what);
  const out: Record<string, DeclaredTensor> = {};
  for (const [alias, t] of Object.entries(value)) {
    if (!isObject(t) || typeof t['dtype'] !== 'string' || !isDType(t['dtype'])) bad(`${what}.${alias}`);
    const shape = t['shape'];
    if (shape !== null && !(Array.isArray(shape) && shape.every((d) => Number.isInteger(d)))) {
      bad(`${what}.${alias}.shape`);
    }
    out[alias] = { dtype: t['dtype'], shape: shape === null ? undefined : (shape as number[]) };
  }
  return out;
}

function features(value: unknown, what: string): ExampleFeatureSpec[] {
  if (!Array.isArray(value)) bad(what);
  return value.map((f: unknown, i) => {
    if (
      !isObject(f) ||
      typeof f['key'] !== 'string' ||
      typeof f['dtype'] !== 'string' ||
      !isDType(f['dtype'])
    ) {
      bad(`${what}[${i}]`);
    }
    const shape = f['shape'];
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && (d as number) >= 0)) {
      bad(`${what}[${i}].shape`);
    }
    const d = f['defaultValue'];
    if (
      d !== undefined &&
      !(Array.isArray(d) && (d.every((x) => typeof x === 'number') || d.every((x) => typeof x === 'string')))
    ) {
      bad(`${what}[${i}].defaultValue`);
    }
    return {
      key: f['key'],
      dtype: f['dtype'],
      shape: shape as number[],
      ...(d === undefined ? {} : { defaultValue: d }),
    };
  });
}

/** Validates a parsed manifest; throws on anything it does not expect (a cache entry is then redone). */
export function parseConversionManifest(json: unknown): ConversionManifest {
  if (!isObject(json) || json['format'] !== 1 || !isObject(json['signatures'])) bad('top level');
  const signatures: Record<string, ConvertedSignature> = {};
  for (const [name, s] of Object.entries(json['signatures'])) {
    if (!isObject(s) || !['ok', 'unsupported', 'error'].includes(s['status'] as string)) bad(name);
    const status = s['status'] as ConvertedSignature['status'];
    const str = (k: string): string | undefined => (typeof s[k] === 'string' ? s[k] : undefined);
    const ops = s['unsupportedOps'];
    const ex = s['examples'];
    signatures[name] = {
      status,
      methodName: str('methodName') ?? '',
      inputs: s['inputs'] === undefined ? {} : tensors(s['inputs'], `${name}.inputs`),
      outputs: s['outputs'] === undefined ? {} : tensors(s['outputs'], `${name}.outputs`),
      onnx: str('onnx'),
      error: str('error'),
      unsupportedOps: Array.isArray(ops) ? ops.filter((o): o is string => typeof o === 'string') : undefined,
      examples:
        ex === undefined
          ? undefined
          : isObject(ex) && typeof ex['inputKey'] === 'string'
            ? { inputKey: ex['inputKey'], features: features(ex['features'], `${name}.examples.features`) }
            : bad(`${name}.examples`),
    };
    if (status === 'ok' && (signatures[name].onnx === undefined || signatures[name].onnx.includes('..'))) {
      bad(`${name}.onnx`);
    }
  }
  const converter: Record<string, string> = {};
  if (isObject(json['converter'])) {
    for (const [k, v] of Object.entries(json['converter'])) if (typeof v === 'string') converter[k] = v;
  }
  return { converter, signatures };
}

/** Why a signature that did not convert cannot be served. */
function unservedReason(s: ConvertedSignature): string {
  return s.unsupportedOps !== undefined && s.unsupportedOps.length > 0
    ? `uses TensorFlow ops with no ONNX equivalent: ${s.unsupportedOps.join(', ')}`
    : `did not convert: ${s.error ?? 'unknown error'}`;
}

/**
 * The runtime's files for a conversion: every signature that converted. Those that did not
 * are left out with their reason (`unserved`), as TF Serving serves the rest of a model;
 * `replaced` names (served another way, e.g. from visionserve.json) are left out silently.
 * Only a version with no signature converted fails, with UNIMPLEMENTED naming each
 * signature and why (e.g. its TensorFlow ops without an ONNX equivalent).
 */
export function modelFilesOf(
  dir: string,
  manifest: ConversionManifest,
  replaced: ReadonlySet<string> = new Set(),
): ModelFiles {
  const files: Record<string, SignatureFile> = {};
  const unserved: Record<string, string> = {};
  for (const [name, s] of Object.entries(manifest.signatures)) {
    if (s.status !== 'ok') {
      if (!replaced.has(name)) unserved[name] = unservedReason(s);
      continue;
    }
    files[name] = {
      path: join(dir, s.onnx!),
      methodName: s.methodName,
      inputs: s.inputs,
      outputs: s.outputs,
      examples: s.examples,
    };
  }
  const problems = Object.entries(unserved).map(([name, why]) => `signature "${name}" ${why}`);
  if (Object.keys(files).length === 0 && problems.length > 0) {
    throw new ServingError(
      Code.UNIMPLEMENTED,
      `SavedModel cannot be served: ${problems.join('; ')} (export the model without it, or serve an encoded-image signature from visionserve.json; see the README)`,
    );
  }
  return problems.length === 0 ? { signatures: files } : { signatures: files, unserved };
}
