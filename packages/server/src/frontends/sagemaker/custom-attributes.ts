import { Code, ServingError, invalidArgument } from '@visionserve/protocol';

/** The model a request is routed to (custom attributes or the multi-model path). */
export interface InvocationTarget {
  readonly name: string;
  readonly version: number | undefined;
  /** predict / classify / regress. */
  readonly method: string;
}

/**
 * Image requests run predict: `tfs-method=classify|regress` takes tf.Examples (JSON), so
 * it is UNIMPLEMENTED with an image body.
 */
export function checkPredictMethod(target: InvocationTarget): void {
  if (target.method !== 'predict') {
    throw new ServingError(
      Code.UNIMPLEMENTED,
      `tfs-method=${target.method} takes tf.Examples as JSON ({"examples": [...]}), not an image body`,
    );
  }
}

/** Routing taken from `X-Amzn-SageMaker-Custom-Attributes` (docs/sagemaker-endpoint.md). */
export interface TfsCustomAttributes {
  /** `tfs-model-name`. */
  readonly modelName: string | undefined;
  /** `tfs-model-version`, a non-negative integer. */
  readonly modelVersion: number | undefined;
  /** `tfs-method`: predict, classify or regress. */
  readonly method: string | undefined;
}

export const CUSTOM_ATTRIBUTES_HEADER = 'x-amzn-sagemaker-custom-attributes';

/**
 * Reads the `tfs-*` pairs of the custom attributes header: every match of
 * `tfs-[a-z-]+=[^,]+`, surrounding whitespace trimmed; other text (the client's own
 * attributes) is ignored, as are unknown `tfs-` keys. A later pair wins over an
 * earlier one. INVALID_ARGUMENT for a version that is not a non-negative integer
 * or an unknown method.
 */
export function parseCustomAttributes(header: string | undefined): TfsCustomAttributes {
  const values = new Map<string, string>();
  for (const match of (header ?? '').matchAll(/tfs-[a-z-]+=[^,]+/g)) {
    const pair = match[0];
    const eq = pair.indexOf('=');
    values.set(pair.slice(0, eq), pair.slice(eq + 1).trim());
  }
  const version = values.get('tfs-model-version');
  if (version !== undefined && !/^\d{1,15}$/.test(version)) {
    throw invalidArgument(`tfs-model-version must be a non-negative integer, got "${version}"`);
  }
  const method = values.get('tfs-method');
  if (method !== undefined && !['predict', 'classify', 'regress'].includes(method)) {
    throw invalidArgument(`tfs-method must be predict, classify or regress, got "${method}"`);
  }
  const name = values.get('tfs-model-name');
  return {
    modelName: name === '' ? undefined : name,
    modelVersion: version === undefined ? undefined : Number(version),
    method,
  };
}
