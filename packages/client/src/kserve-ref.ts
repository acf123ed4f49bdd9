import { invalidArgument } from '@visionserve/protocol';
import type { ModelRef } from './model-ref.js';

/** A model for the KServe API: a name, or a name and a version (the server's choice when omitted). */
export type KServeModelRef =
  string | { readonly name: string; readonly version?: number | string | undefined };

/**
 * The protocol's model name and version string ("" when the server picks). INVALID_ARGUMENT
 * for version labels (the protocol has none), an empty name or a version that is not a
 * non-negative integer.
 */
export function kserveRef(model: KServeModelRef | ModelRef): { name: string; version: string } {
  if (typeof model === 'string') return { name: model, version: '' };
  if ('label' in model && model.label !== undefined) {
    throw invalidArgument('The KServe protocol has no version labels; pin a version');
  }
  if (model.name === '') throw invalidArgument('Model name is empty');
  const version = model.version === undefined ? '' : String(model.version);
  if (version !== '' && !/^\d+$/.test(version)) {
    throw invalidArgument(`Model version must be a non-negative integer, got ${version}`);
  }
  return { name: model.name, version };
}
