/**
 * Classify, Regress and MultiInference on a pinned version, for every protocol that has
 * them (TF Serving gRPC and REST, /invocations with tfs-method). Inputs are tf.Examples
 * (`ExampleInput`); results are TF Serving's ClassificationResult / RegressionResult.
 *
 * Which signature shapes work:
 * - TensorFlow's own (a converted SavedModel's classify/regress signatures): one input
 *   "inputs" of serialized examples, outputs "classes" and/or "scores", or "outputs".
 *   The checks and messages are TF Serving's (it checks structure, not method names, by
 *   default).
 * - Any tensor signature (plain ONNX): each model input is fed from the feature of the
 *   same name (float/int64/bytes lists; a bytes feature for the image input of a model
 *   with a visionserve.json image config is an encoded image). Classify takes the outputs
 *   "scores" and/or "classes", else the one float [batch, classes] output as scores, with
 *   labels from the model's labels file; Regress takes "outputs", else the one output.
 */
import {
  Code,
  type ExampleFeatureSpec,
  type ExampleInput,
  ServingError,
  type Tensor,
  type TfsClass,
  examplesToTensors,
  featureSpecForInput,
  invalidArgument,
  isStringData,
} from '@visionserve/protocol';
import { numbers, softmax } from '@visionserve/vision';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { CallOptions, Servable } from '../../core/inference-service.js';
import {
  CLASSIFY_METHOD_NAME,
  DEFAULT_SIGNATURE_NAME,
  REGRESS_METHOD_NAME,
  type Signature,
  type TensorSpec,
} from '../../core/signature.js';
import type { ConcurrencyLimit } from './concurrency-limit.js';
import { decodeImageBatch } from './input-adapters.js';
import { unservedNote } from '../../core/session.js';

/** TF Serving's signature keys for classify/regress signatures. */
const INPUTS_KEY = 'inputs';
const CLASSES_KEY = 'classes';
const SCORES_KEY = 'scores';
const OUTPUTS_KEY = 'outputs';

export interface ExamplesInferenceOptions {
  /** Image decodes in flight at once (bytes features for image inputs). */
  readonly imageDecodes: ConcurrencyLimit;
}

type Method = 'classify' | 'regress';

/** A signature by name for Classify/Regress (TF Serving: INVALID_ARGUMENT when absent). */
function lookup(servable: Servable<ServableAssets>, requested: string | undefined): [string, Signature] {
  const name = requested === undefined || requested === '' ? DEFAULT_SIGNATURE_NAME : requested;
  const signature = servable.signatures[name];
  if (signature === undefined) {
    throw invalidArgument(
      `No signature was found with the name: ${name}${unservedNote(servable.unservedSignatures, name)}`,
    );
  }
  return [name, signature];
}

/** True for TensorFlow's classify/regress signature shape: one string input "inputs". */
function takesSerializedExamples(signature: Signature): boolean {
  return signature.adapter?.kind === 'tf-example' || signature.inputs[INPUTS_KEY]?.dtype === 'string';
}

/** A SignatureDef in a few words, where TF Serving prints its DebugString. */
function describeSignature(signature: Signature): string {
  const keys = (r: Readonly<Record<string, unknown>>): string => `[${Object.keys(r).join(', ')}]`;
  return `inputs ${keys(signature.inputs)} outputs ${keys(signature.outputs)} method_name "${signature.methodName}"`;
}

/**
 * TF Serving's structure checks (PreProcessClassification / PreProcessRegression, method
 * name check off as by default), in its order and words: for TensorFlow's own signatures
 * (a SavedModel's, or any taking serialized examples in "inputs").
 */
function checkTfStructure(method: Method, signature: Signature): void {
  const inputs = Object.keys(signature.inputs).length;
  const outputs = Object.keys(signature.outputs).length;
  if (inputs !== 1) throw invalidArgument('Expected one input Tensor.');
  if (method === 'classify' && outputs !== 1 && outputs !== 2) {
    throw invalidArgument(`Expected one or two output Tensors, found ${outputs}`);
  }
  if (method === 'regress' && outputs !== 1) throw invalidArgument('Expected one output Tensor.');
  const what = method === 'classify' ? 'classification' : 'regression';
  if (!Object.hasOwn(signature.inputs, INPUTS_KEY)) {
    throw invalidArgument(`No ${what} inputs found in SignatureDef: ${describeSignature(signature)}`);
  }
  if (method === 'regress' && !Object.hasOwn(signature.outputs, OUTPUTS_KEY)) {
    throw invalidArgument(`No regression outputs found in SignatureDef: ${describeSignature(signature)}`);
  }
  if (method === 'classify' && ![CLASSES_KEY, SCORES_KEY].some((k) => Object.hasOwn(signature.outputs, k))) {
    throw invalidArgument(
      `Expected classification signature outputs to contain at least one of "${CLASSES_KEY}" or "${SCORES_KEY}". Signature was: ${describeSignature(signature)}`,
    );
  }
}

/** The output aliases a method reads, after TF Serving's structure checks where they apply. */
function outputsFor(method: Method, signature: Signature): string[] {
  const outputs = Object.keys(signature.outputs);
  const tfShape = takesSerializedExamples(signature) || signature.savedModel === true;
  if (tfShape) checkTfStructure(method, signature);
  if (method === 'regress') {
    if (Object.hasOwn(signature.outputs, OUTPUTS_KEY)) return [OUTPUTS_KEY];
    if (outputs.length !== 1) {
      throw invalidArgument(
        `No regression outputs found in SignatureDef (expected an output "${OUTPUTS_KEY}" or exactly one output)`,
      );
    }
    return outputs;
  }
  const named = [CLASSES_KEY, SCORES_KEY].filter((k) => Object.hasOwn(signature.outputs, k));
  if (named.length > 0) return named;
  const floats = outputs.filter((k) => signature.outputs[k]!.dtype === 'float32');
  if (floats.length !== 1) {
    throw invalidArgument(
      `Expected classification signature outputs to contain at least one of "${CLASSES_KEY}" or "${SCORES_KEY}" (or exactly one float output holding the scores)`,
    );
  }
  return floats;
}

/** The features the examples must provide: the adapter's, else one per model input. */
function featureSpecs(signature: Signature): ExampleFeatureSpec[] {
  if (signature.adapter?.kind === 'tf-example') return [...signature.adapter.features];
  const inputs: Readonly<Record<string, TensorSpec>> = signature.modelInputs ?? signature.inputs;
  return Object.entries(inputs).map(([alias, spec]) => {
    const feature = featureSpecForInput(alias, spec.dtype, spec.shape);
    if (feature === undefined) {
      throw invalidArgument(
        `Input "${alias}" has ${spec.shape === undefined ? 'unknown rank' : 'rank 0'}: tf.Example features need a batch dimension`,
      );
    }
    return feature;
  });
}

/** The encoded images for an image input, when every example carries one as bytes. */
function encodedImages(input: ExampleInput, key: string): Uint8Array[] | undefined {
  const images: Uint8Array[] = [];
  for (const example of input.examples) {
    const value = example.get(key) ?? input.context?.get(key);
    if (value?.kind !== 'bytes' || value.values.length !== 1) return undefined;
    images.push(value.values[0]!);
  }
  return images;
}

/** Model inputs (by alias) built from the examples. */
async function modelInputs(
  servable: Servable<ServableAssets>,
  signature: Signature,
  input: ExampleInput,
  options: ExamplesInferenceOptions,
  call: CallOptions,
): Promise<Record<string, Tensor>> {
  const image = servable.assets.vision.config?.image;
  if (signature.adapter?.kind === 'encoded-image' && image !== undefined) {
    const { inputKey, imageInput } = signature.adapter;
    const images = encodedImages(input, inputKey);
    if (images === undefined) {
      throw invalidArgument(
        `Feature: ${inputKey} (data type: string) is required but could not be found: one encoded image per example`,
      );
    }
    return { [imageInput]: await decodeImageBatch(images, image, options.imageDecodes, call.signal) };
  }
  const specs = featureSpecs(signature);
  const out: Record<string, Tensor> = {};
  let rest = specs;
  if (image !== undefined && signature.adapter === undefined && input.examples.length > 0) {
    for (const spec of specs) {
      if (spec.dtype === 'string' || spec.shape.length !== 3) continue;
      const images = encodedImages(input, spec.key);
      if (images === undefined) continue;
      out[spec.key] = await decodeImageBatch(images, image, options.imageDecodes, call.signal);
      rest = rest.filter((s) => s !== spec);
    }
  }
  return { ...examplesToTensors(input, rest), ...out };
}

async function run(
  servable: Servable<ServableAssets>,
  method: Method,
  signatureName: string | undefined,
  input: ExampleInput,
  options: ExamplesInferenceOptions,
  call: CallOptions,
): Promise<{ name: string; signature: Signature; outputs: Record<string, Tensor>; count: number }> {
  const [name, signature] = lookup(servable, signatureName);
  const aliases = outputsFor(method, signature);
  if (input.examples.length === 0) throw invalidArgument('Input is empty.');
  const inputs = await modelInputs(servable, signature, input, options, call);
  const outputs = await servable.predict(
    { inputs, outputFilter: aliases, signatureName: name, modelInputs: true },
    call,
  );
  return { name, signature, outputs, count: input.examples.length };
}

function matrix(t: Tensor, what: string, count: number): number {
  if (t.shape.length !== 2) {
    throw invalidArgument(`Expected Tensor shape: [batch_size num_classes] but got [${t.shape.join(',')}]`);
  }
  if (t.shape[0] !== count) {
    throw invalidArgument(`Expected ${what} output batch size of ${count}. Got: ${t.shape[0]!}`);
  }
  return t.shape[1]!;
}

/**
 * Scores per example, softmaxed when the model's visionserve.json says its scores are logits
 * (postprocess.softmax: true, or "auto" and the row does not already sum to 1).
 */
function scoreRows(
  t: Tensor,
  assets: ServableAssets,
  mayApplySoftmax: boolean,
  count: number,
): Float64Array[] {
  if (t.dtype !== 'float32') throw invalidArgument(`Expected scores Tensor of DT_FLOAT. Got: ${t.dtype}`);
  const classes = matrix(t, 'scores', count);
  const values = numbers(t, 'scores');
  const post = assets.vision.config?.postprocess;
  const mode = mayApplySoftmax && post?.kind === 'classification' ? (post.softmax ?? false) : false;
  return Array.from({ length: count }, (_, i) => {
    const raw = Float64Array.from({ length: classes }, (_, c) => values[i * classes + c]!);
    if (mode === false) return raw;
    if (mode === 'auto' && Math.abs(raw.reduce((a, b) => a + b, 0) - 1) < 1e-3) return raw;
    return softmax(raw, 0, classes);
  });
}

/**
 * Classify: one list of classes (label, score) per example. Labels come from the
 * signature's "classes" output, else from the model's labels file, else are empty.
 */
export async function classifyOn(
  servable: Servable<ServableAssets>,
  signatureName: string | undefined,
  input: ExampleInput,
  options: ExamplesInferenceOptions,
  call: CallOptions,
): Promise<{ signatureName: string; results: TfsClass[][] }> {
  const { name, signature, outputs, count } = await run(
    servable,
    'classify',
    signatureName,
    input,
    options,
    call,
  );
  const classesT = outputs[CLASSES_KEY];
  const scoresT = outputs[SCORES_KEY] ?? (classesT === undefined ? Object.values(outputs)[0] : undefined);
  let labels: (i: number, c: number) => string = () => '';
  let width = 0;
  if (classesT !== undefined) {
    if (!isStringData(classesT.data)) {
      throw invalidArgument(`Expected classes Tensor of DT_STRING. Got: ${classesT.dtype}`);
    }
    width = matrix(classesT, 'classes', count);
    const data = classesT.data;
    const decoder = new TextDecoder();
    labels = (i, c) => decoder.decode(data[i * width + c]);
  }
  let rows: Float64Array[] | undefined;
  if (scoresT !== undefined) {
    rows = scoreRows(scoresT, servable.assets, !takesSerializedExamples(signature), count);
    const classes = rows[0]?.length ?? 0;
    if (classesT !== undefined && classes !== width) {
      throw invalidArgument(
        `Tensors class and score should match in dim_size(1). Got ${width} vs. ${classes}`,
      );
    }
    width = classes;
    const file = servable.assets.vision.labels;
    const post = servable.assets.vision.config?.postprocess;
    const offset = post?.labelOffset ?? 0;
    if (classesT === undefined && file !== undefined) labels = (_i, c) => file.get(c + offset) ?? '';
  }
  const results = Array.from({ length: count }, (_, i) =>
    Array.from({ length: width }, (_, c) => ({ label: labels(i, c), score: rows?.[i]![c] ?? 0 })),
  );
  return { signatureName: name, results };
}

/** Regress: one value per example. */
export async function regressOn(
  servable: Servable<ServableAssets>,
  signatureName: string | undefined,
  input: ExampleInput,
  options: ExamplesInferenceOptions,
  call: CallOptions,
): Promise<{ signatureName: string; values: Float32Array }> {
  const { name, outputs, count } = await run(servable, 'regress', signatureName, input, options, call);
  const t = Object.values(outputs)[0]!;
  if (!(t.shape.length === 1 || (t.shape.length === 2 && t.shape[1] === 1))) {
    throw invalidArgument(
      `Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got [${t.shape.join(',')}]`,
    );
  }
  if (t.shape[0] !== count) {
    throw invalidArgument(`Input batch size did not match output batch size: ${count} vs. ${t.shape[0]!}`);
  }
  if (t.dtype !== 'float32') throw invalidArgument(`Expected output Tensor of DT_FLOAT.  Got: ${t.dtype}`);
  return { signatureName: name, values: Float32Array.from(numbers(t, 'outputs')) };
}

/** One task of a MultiInference request. */
export interface InferenceTask {
  readonly modelName: string;
  readonly signatureName: string | undefined;
  readonly methodName: string;
}

export type InferenceTaskResult =
  | { readonly signatureName: string; readonly classification: TfsClass[][] }
  | { readonly signatureName: string; readonly regression: Float32Array };

/**
 * MultiInference: several classify/regress signatures of one model on the same examples,
 * with TF Serving's checks (same model, no signature twice, methods classify/regress).
 */
export async function multiInferenceOn(
  servable: Servable<ServableAssets>,
  tasks: readonly InferenceTask[],
  input: ExampleInput,
  options: ExamplesInferenceOptions,
  call: CallOptions,
): Promise<InferenceTaskResult[]> {
  const seen = new Set<string>();
  for (const task of tasks) {
    if (task.modelName === '') throw invalidArgument('Found ModelSpec with an empty model name.');
    if (task.modelName !== servable.name) {
      throw invalidArgument('All ModelSpecs in a MultiInferenceRequest must access the same model name.');
    }
    const name =
      task.signatureName === undefined || task.signatureName === ''
        ? DEFAULT_SIGNATURE_NAME
        : task.signatureName;
    if (seen.has(name)) throw invalidArgument(`Duplicate evaluation of signature: ${name}`);
    seen.add(name);
    if (!Object.hasOwn(servable.signatures, name)) {
      throw invalidArgument(`Requested signature not found in model graph: ${name}`);
    }
    if (task.methodName !== CLASSIFY_METHOD_NAME && task.methodName !== REGRESS_METHOD_NAME) {
      throw new ServingError(Code.UNIMPLEMENTED, `Unsupported signature method_name: ${task.methodName}`);
    }
  }
  const results: InferenceTaskResult[] = [];
  for (const task of tasks) {
    if (task.methodName === CLASSIFY_METHOD_NAME) {
      const r = await classifyOn(servable, task.signatureName, input, options, call);
      results.push({ signatureName: r.signatureName, classification: r.results });
    } else {
      const r = await regressOn(servable, task.signatureName, input, options, call);
      results.push({ signatureName: r.signatureName, regression: r.values });
    }
  }
  return results;
}
