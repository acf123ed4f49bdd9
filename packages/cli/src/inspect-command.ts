/**
 * `visionserve inspect`: a model's signature like `saved_model_cli show --all`, from an
 * .onnx file, a model base path or repository directory (all models and versions), or a
 * running server (GetModelMetadata over gRPC or REST).
 */
import { readFile, readdir, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { tfDataTypeName } from '@visionserve/protocol';
import type { ModelMetadata } from '@visionserve/client';
import { listVersionDirectories, MODEL_FILE_NAME } from '@visionserve/server';
import { type OnnxModelInfo, type OnnxValueInfo, readOnnxModelInfo } from '@visionserve/protocol/onnx';
import { type Command, UsageError, flag, numberOption, parseCommandArgs, stringOption } from './cli-args.js';

const HELP = `Usage: visionserve inspect <model.onnx | model-base-dir | repository-dir> [--json]
       visionserve inspect --grpc HOST:PORT --model NAME [--version N] [--json]
       visionserve inspect --rest URL --model NAME [--version N] [--json]

Shows each model's serving signature (inputs and outputs with TF dtypes and shapes, -1 for
dynamic dimensions), plus, for files, the ONNX producer, IR version, opsets, node and
parameter counts and the size on disk. Reads ONNX files directly (no onnxruntime needed).

A directory is either a model base path (<dir>/<version>/model.onnx) or a repository of
them (<dir>/<model>/<version>/model.onnx); every version found is shown.

Options:
  --grpc HOST:PORT   ask a running server over gRPC (GetModelMetadata)
  --rest URL         ask a running server over REST (GET /v1/models/<m>/metadata)
  --model NAME       model to ask the server about
  --version N        a specific version (default: the latest)
  --timeout-ms MS    deadline for server calls (default 10000)
  --json             machine-readable output
`;

/** A tensor in a signature, as printed. */
export interface TensorView {
  readonly name: string;
  /** visionserve dtype ("float32"), or the raw type name when it has none. */
  readonly dtype: string;
  /** TF DataType name, e.g. "DT_FLOAT". */
  readonly tfDtype: string;
  /** -1 for dynamic dimensions; undefined for unknown rank. */
  readonly shape: readonly number[] | undefined;
  /** Symbolic dimension names where the model has them (ONNX dim_param). */
  readonly dims?: readonly (number | string | null)[];
}

export interface SignatureView {
  readonly inputs: Readonly<Record<string, TensorView>>;
  readonly outputs: Readonly<Record<string, TensorView>>;
  readonly methodName: string;
}

export interface ModelView {
  readonly name: string;
  readonly version?: number;
  readonly path?: string;
  readonly sizeBytes?: number;
  readonly onnx?: Omit<OnnxModelInfo, 'inputs' | 'outputs'>;
  readonly signatures: Readonly<Record<string, SignatureView>>;
}

function tensorViewFromOnnx(v: OnnxValueInfo): TensorView {
  const hasNames = v.dims?.some((d) => typeof d === 'string') ?? false;
  return {
    name: v.name,
    dtype: v.dtype ?? v.elemType.toLowerCase(),
    tfDtype: v.dtype ? tfDataTypeName(v.dtype) : `DT_INVALID (${v.elemType})`,
    shape: v.dims?.map((d) => (typeof d === 'number' ? d : -1)),
    ...(hasNames && v.dims ? { dims: v.dims } : {}),
  };
}

/** The view of one .onnx file (signature `serving_default`, as the server exposes it). */
export async function inspectOnnxFile(path: string, name?: string, version?: number): Promise<ModelView> {
  const [bytes, info] = await Promise.all([readFile(path), stat(path)]);
  const model = readOnnxModelInfo(bytes);
  const { inputs, outputs, ...onnx } = model;
  return {
    name: name ?? basename(path).replace(/\.onnx$/, ''),
    ...(version !== undefined ? { version } : {}),
    path,
    sizeBytes: info.size,
    onnx,
    signatures: {
      serving_default: {
        inputs: Object.fromEntries(inputs.map((v) => [v.name, tensorViewFromOnnx(v)])),
        outputs: Object.fromEntries(outputs.map((v) => [v.name, tensorViewFromOnnx(v)])),
        methodName: 'tensorflow/serving/predict',
      },
    },
  };
}

/** Every model version under a directory (base path or repository), sorted by name and version. */
export async function inspectDirectory(dir: string): Promise<ModelView[]> {
  const own = await listVersionDirectories(dir);
  if (own.size > 0) {
    return Promise.all(
      [...own].map(([v, name]) => inspectOnnxFile(join(dir, name, MODEL_FILE_NAME), basename(dir), v)),
    );
  }
  const views: ModelView[] = [];
  const entries = (await readdir(dir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    for (const [v, name] of await listVersionDirectories(join(dir, entry.name))) {
      views.push(await inspectOnnxFile(join(dir, entry.name, name, MODEL_FILE_NAME), entry.name, v));
    }
  }
  if (views.length === 0)
    throw new Error(
      `no models found under ${dir} (expected <dir>/<version>/${MODEL_FILE_NAME} or <dir>/<model>/<version>/${MODEL_FILE_NAME})`,
    );
  return views;
}

/** The view of a server's GetModelMetadata answer. */
export function viewFromMetadata(metadata: ModelMetadata): ModelView {
  return {
    name: metadata.model.name,
    ...(metadata.model.version !== undefined ? { version: metadata.model.version } : {}),
    signatures: Object.fromEntries(
      Object.entries(metadata.signatures).map(([name, sig]) => {
        const map = (tensors: typeof sig.inputs): Record<string, TensorView> =>
          Object.fromEntries(
            Object.entries(tensors).map(([alias, t]) => [
              alias,
              { name: t.name, dtype: t.dtype ?? t.tfDtype, tfDtype: t.tfDtype, shape: t.shape },
            ]),
          );
        return [name, { inputs: map(sig.inputs), outputs: map(sig.outputs), methodName: sig.methodName }];
      }),
    ),
  };
}

function formatShape(shape: readonly number[] | undefined): string {
  if (shape === undefined) return 'unknown_rank';
  return `(${shape.join(', ')}${shape.length === 1 ? ',' : ''})`;
}

/** saved_model_cli-style text for one model. */
export function formatModelView(view: ModelView): string {
  const lines: string[] = [];
  const where = view.path
    ? `  (${view.path}${view.sizeBytes !== undefined ? `, ${view.sizeBytes.toLocaleString('en-US')} bytes` : ''})`
    : '';
  lines.push(`MODEL ${view.name}${view.version !== undefined ? ` version ${view.version}` : ''}${where}`);
  if (view.onnx) {
    const o = view.onnx;
    const producer = [o.producerName, o.producerVersion].filter((s) => s !== '').join(' ') || '(none)';
    lines.push(
      `  producer: ${producer}   ir_version: ${o.irVersion}   opsets: ${o.opsets.map((s) => `${s.domain} ${s.version}`).join(', ')}`,
    );
    lines.push(
      `  graph${o.graphName ? ` "${o.graphName}"` : ''}: ${o.nodeCount} nodes, ${o.parameterCount.toLocaleString('en-US')} parameters in ${o.initializerCount} initializers`,
    );
    if (o.docString) lines.push(`  doc: ${o.docString.split('\n')[0]!}`);
  }
  for (const [name, sig] of Object.entries(view.signatures)) {
    lines.push('', `signature_def['${name}']:`);
    const section = (title: string, kind: string, tensors: Readonly<Record<string, TensorView>>): void => {
      lines.push(`  ${title}s:`);
      for (const [alias, t] of Object.entries(tensors)) {
        lines.push(`    ${kind}['${alias}'] tensor_info:`);
        lines.push(`        dtype: ${t.tfDtype}`);
        lines.push(
          `        shape: ${formatShape(t.shape)}${t.dims ? `   # dims: (${t.dims.map((d) => d ?? '?').join(', ')})` : ''}`,
        );
        lines.push(`        name: ${t.name}`);
      }
    };
    section('input', 'inputs', sig.inputs);
    section('output', 'outputs', sig.outputs);
    lines.push(`  method: ${sig.methodName}`);
  }
  return lines.join('\n');
}

export const inspect: Command = {
  help: HELP,
  async run(argv) {
    const { values, positionals } = parseCommandArgs(argv, {
      grpc: { type: 'string' },
      rest: { type: 'string' },
      model: { type: 'string' },
      version: { type: 'string' },
      'timeout-ms': { type: 'string' },
      json: { type: 'boolean' },
    });
    const grpc = stringOption(values, 'grpc');
    const rest = stringOption(values, 'rest');
    const version = numberOption(values, 'version', { min: 0, integer: true });
    let views: ModelView[];
    if (grpc !== undefined || rest !== undefined) {
      if (positionals.length > 0) throw new UsageError('give either a path or --grpc/--rest, not both');
      if (grpc !== undefined && rest !== undefined) throw new UsageError('give one of --grpc and --rest');
      const model = stringOption(values, 'model');
      if (model === undefined) throw new UsageError('--model is required with --grpc or --rest');
      const timeoutMs = numberOption(values, 'timeout-ms', { min: 1 }) ?? 10_000;
      const client = await import('@visionserve/client');
      const c =
        grpc !== undefined
          ? client.createTfsGrpcClient({ address: grpc })
          : client.createTfsRestClient({ baseUrl: rest! });
      try {
        views = [viewFromMetadata(await c.getModelMetadata({ name: model, version }, { timeoutMs }))];
      } finally {
        c.close();
      }
    } else {
      if (positionals.length !== 1)
        throw new UsageError('expects one .onnx file or directory (or --grpc/--rest with --model)');
      const target = positionals[0]!;
      const info = await stat(target).catch(() => {
        throw new Error(`${target}: no such file or directory`);
      });
      views = info.isDirectory() ? await inspectDirectory(target) : [await inspectOnnxFile(target)];
    }
    if (flag(values, 'json')) console.log(JSON.stringify({ models: views }, null, 2));
    else console.log(views.map(formatModelView).join('\n\n'));
    return 0;
  },
};
