/**
 * `visionserve predict`: image / .npy / JSON tensor -> a server (gRPC, REST or
 * /invocations) -> top-k classes, detections or raw outputs, as text or JSON.
 * Everything goes through @visionserve/client, as a user's program would.
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import {
  type ClientTlsOptions,
  type ModelMetadata,
  type PredictResult,
  type SignatureInfo,
  type Tensor,
  Code,
  ServingError,
  type KServeModelMetadata,
  createInvocationsClient,
  createKServeGrpcClient,
  createKServeHttpClient,
  createTfsGrpcClient,
  createTfsRestClient,
  fromNested,
  isNpy,
  parseNpy,
} from '@visionserve/client';
import {
  type ClassScore,
  type Detection,
  type DetectionResult,
  type Labels,
  classifyTopK,
  decodeDetections,
  parseLabels,
} from '@visionserve/vision';
import type { ImagePresetName, ImageToTensorOptions } from '@visionserve/client/image';
import {
  type DType,
  isStringData,
  parseTfsJsonText,
  parseTfsPredictBody,
  tfDataTypeName,
  tfsJsonToTensors,
} from '@visionserve/protocol';
import { dtypeOfDatatype, isKServeDatatype } from '@visionserve/protocol/kserve';
import {
  type Command,
  type ParsedValues,
  UsageError,
  choiceOption,
  flag,
  numberListOption,
  numberOption,
  parseCommandArgs,
  stringOption,
} from './cli-args.js';

const PRESETS = ['imagenet', 'tfod', 'yolox', 'mnist', 'none'] as const;

const HELP = `Usage: visionserve predict <input> --model NAME [options]

Sends an image, a .npy tensor or a JSON tensor file to a model and prints the top classes
(classifiers), the detections (TF Object Detection API outputs) or a summary of the raw outputs.

<input>: an image (JPEG, PNG, WebP, ...), a .npy file, or a .json file holding a TF Serving
predict body ({"instances": ...} or {"inputs": ...}) or a bare nested list for the only input.

Target:
  --protocol grpc|rest|invocations|kserve-http|kserve-grpc   default grpc
  --server HOST            host of the default ports (default 127.0.0.1)
  --grpc HOST:PORT         gRPC address (default <server>:8500)
  --rest URL               REST base URL (default http://<server>:8501)
  --invocations URL        SageMaker-style endpoint (default http://<server>:8080); the image
                           bytes are sent as application/x-image and the server preprocesses them
  --kserve URL             KServe v2 / Open Inference Protocol HTTP base URL (default
                           http://<server>:8501, where visionserve serves /v2; Triton: :8000)
  --kserve-json            kserve-http: JSON tensors instead of binary tensor data
  --kserve-grpc HOST:PORT  KServe v2 gRPC address (default <server>:8500, where visionserve serves
                           inference.GRPCInferenceService beside TF Serving; Triton: :8001)
  --model NAME             model name (required but for invocations; tfs-model-name there)
  --version N | --label L  pin a version or a version label (kserve-*: versions only)
  --signature NAME         signature (default serving_default)
  --input-name NAME        input alias (default: the signature's only input)
  --format row|columnar    REST body format (default columnar)
  --encoding tensor_content|typed   gRPC request encoding (default tensor_content)
  --timeout-ms MS          deadline per call (default 30000)

TLS (any of these makes the default addresses https://; so do https:// URLs and addresses):
  --tls                    use TLS, trusting Node's public CA roots
  --ca FILE                PEM CA certificate(s) the server's certificate must chain to
  --cert FILE --key FILE   client certificate and key, for servers that verify clients
  --key-passphrase-file FILE
                           the passphrase of an encrypted --key (the file's first line), kept
                           off the command line
  --servername NAME        name the server's certificate must carry (default: the host)

Image preprocessing (grpc/rest; the default preset is guessed from the model's input signature):
  --preset imagenet|tfod|yolox|mnist|none
                           imagenet: resize 256, centre-crop 224, NCHW float, ImageNet mean/std
                           tfod: the image as is, uint8 NHWC [1,H,W,3] (TF OD API detectors)
                           yolox: 416 letterbox (pad 114), BGR, NCHW float 0-255
                           mnist: 28x28 grayscale, NCHW float /255
  --size N|WxH             target size            --resize stretch|crop|letterbox
  --layout NCHW|NHWC       --dtype float32|uint8  --channel-order RGB|BGR   --grayscale
  --scale X                multiplier before mean/std (default 1/255)
  --mean a,b,c  --std a,b,c

Output:
  --task auto|classify|detect|raw   default auto (detect for TF OD outputs, classify for one [1,N] output)
  --labels FILE            class names, one a line (the ImageNet synset file works as is)
  --label-map FILE         TF OD API label map (.pbtxt) for detections
  --top-k N                classes to show (default 5)
  --threshold X            minimum detection score (default 0.5)
  --softmax auto|on|off    apply softmax to classifier outputs (default auto: unless they sum to 1)
  --json                   machine-readable output on stdout

Examples:
  visionserve predict cat.jpg --model mobilenet --labels imagenet_synset.txt
  visionserve predict street.jpg --model detector --protocol rest --label-map mscoco_label_map.pbtxt
  visionserve predict tensor.npy --model mobilenet --json
  visionserve predict cat.jpg --protocol invocations --model mobilenet
  visionserve predict cat.jpg --protocol kserve-http --model mobilenet --labels imagenet_synset.txt
  visionserve predict cat.jpg --protocol kserve-grpc --model mobilenet --labels imagenet_synset.txt
`;

const OPTIONS = {
  protocol: { type: 'string' },
  server: { type: 'string' },
  grpc: { type: 'string' },
  rest: { type: 'string' },
  invocations: { type: 'string' },
  kserve: { type: 'string' },
  'kserve-json': { type: 'boolean' },
  'kserve-grpc': { type: 'string' },
  model: { type: 'string' },
  version: { type: 'string' },
  label: { type: 'string' },
  signature: { type: 'string' },
  'input-name': { type: 'string' },
  format: { type: 'string' },
  encoding: { type: 'string' },
  'timeout-ms': { type: 'string' },
  tls: { type: 'boolean' },
  ca: { type: 'string' },
  cert: { type: 'string' },
  key: { type: 'string' },
  'key-passphrase-file': { type: 'string' },
  servername: { type: 'string' },
  preset: { type: 'string' },
  size: { type: 'string' },
  resize: { type: 'string' },
  layout: { type: 'string' },
  dtype: { type: 'string' },
  'channel-order': { type: 'string' },
  grayscale: { type: 'boolean' },
  scale: { type: 'string' },
  mean: { type: 'string' },
  std: { type: 'string' },
  task: { type: 'string' },
  labels: { type: 'string' },
  'label-map': { type: 'string' },
  'top-k': { type: 'string' },
  threshold: { type: 'string' },
  softmax: { type: 'string' },
  json: { type: 'boolean' },
} as const;

type InputKind = 'image' | 'npy' | 'json';

function kindOf(path: string, bytes: Uint8Array): InputKind {
  if (isNpy(bytes)) return 'npy';
  const ext = extname(path).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext === '.npy') return 'npy';
  return 'image';
}

/** The preset a signature's single image input most likely wants. */
export function guessPreset(input: {
  dtype: DType | undefined;
  shape: readonly number[] | undefined;
}): ImagePresetName | undefined {
  const s = input.shape;
  if (s === undefined || s.length !== 4) return undefined;
  if (input.dtype === 'uint8' && s[3] === 3) return 'tfod';
  if (input.dtype !== 'float32') return undefined;
  if (s[1] === 3 && s[2] === 416 && s[3] === 416) return 'yolox';
  if (s[1] === 1 && s[2] === 28 && s[3] === 28) return 'mnist';
  if (s[1] === 3) return 'imagenet';
  return undefined;
}

function parseSize(raw: string): { width: number; height: number } {
  const m = /^(\d+)(?:x(\d+))?$/i.exec(raw);
  if (!m) throw new UsageError(`--size expects N or WxH, got "${raw}"`);
  const width = Number(m[1]);
  return { width, height: m[2] === undefined ? width : Number(m[2]) };
}

/** The TLS options the flags ask for; undefined when none is given. */
async function tlsFrom(values: ParsedValues): Promise<ClientTlsOptions | undefined> {
  const file = async (name: string): Promise<string | undefined> => {
    const path = stringOption(values, name);
    if (path === undefined) return undefined;
    return readFile(path, 'utf8').catch((error: unknown) => {
      throw new UsageError(
        `cannot read --${name} ${path}: ${error instanceof Error ? error.message : String(error)}`,
      );
    });
  };
  const [ca, cert, key] = [await file('ca'), await file('cert'), await file('key')];
  const passphraseText = await file('key-passphrase-file');
  const servername = stringOption(values, 'servername');
  if ((cert === undefined) !== (key === undefined)) throw new UsageError('give --cert and --key together');
  if (passphraseText !== undefined && key === undefined)
    throw new UsageError('--key-passphrase-file is the passphrase of --key: give --key too');
  // The first line, without its line ending: `echo secret > file` and editors add one.
  const passphrase = passphraseText?.split(/\r?\n/, 1)[0];
  if (!flag(values, 'tls') && ca === undefined && cert === undefined && servername === undefined)
    return undefined;
  return {
    ...(ca !== undefined ? { ca } : {}),
    ...(cert !== undefined ? { cert } : {}),
    ...(key !== undefined ? { key } : {}),
    ...(passphrase !== undefined ? { passphrase } : {}),
    ...(servername !== undefined ? { servername } : {}),
  };
}

interface Rendered {
  readonly text: string;
  readonly json: unknown;
}

const PROTOCOLS = ['grpc', 'rest', 'invocations', 'kserve-http', 'kserve-grpc'] as const;

/** What the command line asks for. */
interface PredictArgs {
  readonly values: ParsedValues;
  readonly inputPath: string;
  readonly protocol: (typeof PROTOCOLS)[number];
  readonly host: string;
  readonly model: string | undefined;
  readonly version: number | undefined;
  readonly label: string | undefined;
  readonly signatureName: string | undefined;
  readonly timeoutMs: number;
  readonly task: 'auto' | 'classify' | 'detect' | 'raw';
  readonly topKCount: number;
  readonly threshold: number;
  readonly softmaxMode: 'auto' | 'on' | 'off';
  readonly asJson: boolean;
  readonly labelsPath: string | undefined;
  readonly labelMapPath: string | undefined;
  readonly format: 'row' | 'columnar';
  readonly encoding: 'tensor_content' | 'typed';
  readonly imageOverrides: ImageToTensorOptions;
  readonly tls: ClientTlsOptions | undefined;
  readonly scheme: 'http' | 'https';
  readonly presetChoice: (typeof PRESETS)[number] | undefined;
}

async function parsePredictArgs(argv: readonly string[]): Promise<PredictArgs> {
  const { values, positionals } = parseCommandArgs(argv, OPTIONS);
  if (positionals.length !== 1) throw new UsageError('expects exactly one input file');
  const inputPath = positionals[0]!;
  const protocol = choiceOption(values, 'protocol', PROTOCOLS) ?? 'grpc';
  const host = stringOption(values, 'server') ?? '127.0.0.1';
  const model = stringOption(values, 'model');
  const version = numberOption(values, 'version', { min: 0, integer: true });
  const label = stringOption(values, 'label');
  if (version !== undefined && label !== undefined)
    throw new UsageError('give --version or --label, not both');
  const signatureName = stringOption(values, 'signature');
  const timeoutMs = numberOption(values, 'timeout-ms', { min: 1 }) ?? 30_000;
  const task = choiceOption(values, 'task', ['auto', 'classify', 'detect', 'raw'] as const) ?? 'auto';
  const topKCount = numberOption(values, 'top-k', { min: 1, integer: true }) ?? 5;
  const threshold = numberOption(values, 'threshold', { min: 0, max: 1 }) ?? 0.5;
  const softmaxMode = choiceOption(values, 'softmax', ['auto', 'on', 'off'] as const) ?? 'auto';
  const asJson = flag(values, 'json');
  const labelsPath = stringOption(values, 'labels');
  const labelMapPath = stringOption(values, 'label-map');
  const format = choiceOption(values, 'format', ['row', 'columnar'] as const) ?? 'columnar';
  const encoding = choiceOption(values, 'encoding', ['tensor_content', 'typed'] as const) ?? 'tensor_content';
  const imageOverrides = imageOptionsFrom(values);
  const tls = await tlsFrom(values);
  const scheme = tls === undefined ? 'http' : 'https';
  const presetChoice = choiceOption(values, 'preset', PRESETS);
  return {
    values,
    inputPath,
    protocol,
    host,
    model,
    version,
    label,
    signatureName,
    timeoutMs,
    task,
    topKCount,
    threshold,
    softmaxMode,
    asJson,
    labelsPath,
    labelMapPath,
    format,
    encoding,
    imageOverrides,
    tls,
    scheme,
    presetChoice,
  };
}

/** The input file and the label files named on the command line. */
interface PredictInput {
  readonly bytes: Buffer;
  readonly kind: InputKind;
  readonly labels: Labels | undefined;
  readonly labelMap: Labels | undefined;
}

async function readPredictInput(args: PredictArgs): Promise<PredictInput> {
  const { inputPath, labelsPath, labelMapPath } = args;
  const bytes = await readFile(inputPath).catch((error: unknown) => {
    throw new Error(`cannot read ${inputPath}: ${error instanceof Error ? error.message : String(error)}`);
  });
  const kind = kindOf(inputPath, bytes);
  const labels =
    labelsPath === undefined ? undefined : parseLabels(await readFile(labelsPath, 'utf8'), labelsPath);
  const labelMap =
    labelMapPath === undefined
      ? undefined
      : parseLabels(await readFile(labelMapPath, 'utf8'), labelMapPath, 'label_map');
  return { bytes, kind, labels, labelMap };
}

const withTlsOf = (args: PredictArgs): { tls?: ClientTlsOptions } =>
  args.tls === undefined ? {} : { tls: args.tls };

async function predictByInvocations(args: PredictArgs, input: PredictInput): Promise<number> {
  const { values, model, version, timeoutMs, protocol } = args;
  const { kind, bytes } = input;
  if (kind === 'npy') throw new UsageError('/invocations takes an image or a JSON body, not .npy');
  const client = createInvocationsClient({
    baseUrl: stringOption(values, 'invocations') ?? `${args.scheme}://${args.host}:8080`,
    ...withTlsOf(args),
  });
  try {
    const result = await client.invoke(kind === 'json' ? bytes.toString('utf8') : bytes, {
      contentType: kind === 'json' ? 'application/json' : 'application/x-image',
      ...(model !== undefined ? { model } : {}),
      ...(version !== undefined ? { version } : {}),
      timeoutMs,
    });
    const rendered = renderInvocation(result.json(), input.labels ?? input.labelMap);
    console.log(
      args.asJson
        ? JSON.stringify({ protocol, model: model ?? null, response: rendered.json }, null, 2)
        : rendered.text,
    );
    return 0;
  } finally {
    client.close();
  }
}

/** The client of the chosen model protocol (one of the three is set). */
interface ModelClients {
  readonly grpcClient: ReturnType<typeof createTfsGrpcClient> | undefined;
  readonly restClient: ReturnType<typeof createTfsRestClient> | undefined;
  readonly kserveClient:
    ReturnType<typeof createKServeHttpClient> | ReturnType<typeof createKServeGrpcClient> | undefined;
}

function openModelClients(args: PredictArgs): ModelClients {
  const { protocol, values, host, scheme } = args;
  const withTls = withTlsOf(args);
  const grpcClient =
    protocol === 'grpc'
      ? createTfsGrpcClient({
          address: stringOption(values, 'grpc') ?? `${host}:8500`,
          encoding: args.encoding,
          ...withTls,
        })
      : undefined;
  const restClient =
    protocol === 'rest'
      ? createTfsRestClient({
          baseUrl: stringOption(values, 'rest') ?? `${scheme}://${host}:8501`,
          ...withTls,
        })
      : undefined;
  const kserveClient =
    protocol === 'kserve-http'
      ? createKServeHttpClient({
          baseUrl: stringOption(values, 'kserve') ?? `${scheme}://${host}:8501`,
          binary: !flag(values, 'kserve-json'),
          ...withTls,
        })
      : protocol === 'kserve-grpc'
        ? createKServeGrpcClient({
            address: stringOption(values, 'kserve-grpc') ?? `${host}:8500`,
            ...withTls,
          })
        : undefined;
  return { grpcClient, restClient, kserveClient };
}

/** The request's tensors from the input file: JSON, .npy, or an image preprocessed for the signature. */
async function inputTensors(
  args: PredictArgs,
  input: PredictInput,
  signature: SignatureInfo,
): Promise<{ inputs: Record<string, Tensor>; original: { width: number; height: number } | undefined }> {
  const { values } = args;
  const { bytes, kind } = input;
  if (kind === 'json') {
    return {
      inputs: tensorsFromJson(bytes.toString('utf8'), signature, stringOption(values, 'input-name')),
      original: undefined,
    };
  }
  const alias = inputAlias(signature, stringOption(values, 'input-name'));
  if (kind === 'npy') return { inputs: { [alias]: parseNpy(bytes) }, original: undefined };
  const preset = args.presetChoice ?? guessPreset(signature.inputs[alias]!);
  if (preset === undefined && Object.keys(args.imageOverrides).length === 0) {
    throw new UsageError(
      `cannot guess the preprocessing for input '${alias}' ${describeInput(signature, alias)}: pass --preset or --size/--layout/--dtype`,
    );
  }
  const image = await import('@visionserve/client/image');
  const base: ImageToTensorOptions =
    preset === undefined || preset === 'none' ? {} : image.IMAGE_PRESETS[preset];
  const decoded = await image.imageToTensor(bytes, { ...base, ...args.imageOverrides });
  return {
    inputs: { [alias]: decoded.tensor },
    original: { width: decoded.originalWidth, height: decoded.originalHeight },
  };
}

async function predictOnModel(args: PredictArgs, input: PredictInput, model: string): Promise<number> {
  const { version, label, signatureName, timeoutMs, protocol } = args;
  const ref = { name: model, version, label, signatureName };
  const { grpcClient, restClient, kserveClient } = openModelClients(args);
  if (kserveClient !== undefined && label !== undefined) {
    throw new UsageError('the KServe protocol has no version labels: use --version');
  }
  const client = grpcClient ?? restClient ?? kserveClient!;
  try {
    const metadata: ModelMetadata = kserveClient
      ? metadataFromKServe(await kserveClient.modelMetadata({ name: model, version }, { timeoutMs }))
      : await (grpcClient ?? restClient!).getModelMetadata(ref, { timeoutMs });
    const signature = metadata.signatures[signatureName ?? 'serving_default'];
    if (signature === undefined) {
      throw new ServingError(
        Code.NOT_FOUND,
        `model ${model} has no signature "${signatureName ?? 'serving_default'}"`,
      );
    }
    const { inputs, original } = await inputTensors(args, input, signature);
    const result: PredictResult = grpcClient
      ? await grpcClient.predict(ref, inputs, { timeoutMs })
      : kserveClient
        ? await kserveClient.infer({ name: model, version }, inputs, { timeoutMs })
        : await restClient!.predict(ref, inputs, { format: args.format, timeoutMs });
    const rendered = render(result, {
      task: args.task,
      topK: args.topKCount,
      threshold: args.threshold,
      softmax: args.softmaxMode,
      ...(input.labels ? { labels: input.labels } : {}),
      ...(input.labelMap ? { labelMap: input.labelMap } : {}),
      ...(original ? { original } : {}),
    });
    const header = `${result.model.name}${result.model.version !== undefined ? ` v${result.model.version}` : ''} (${protocol})`;
    console.log(
      args.asJson
        ? JSON.stringify({ protocol, model: result.model, ...(rendered.json as object) }, null, 2)
        : `${header}: ${rendered.text}`,
    );
    return 0;
  } finally {
    client.close();
  }
}

export const predict: Command = {
  help: HELP,
  async run(argv) {
    const args = await parsePredictArgs(argv);
    const input = await readPredictInput(args);
    if (args.protocol === 'invocations') return predictByInvocations(args, input);
    if (args.model === undefined) throw new UsageError('--model is required');
    return predictOnModel(args, input, args.model);
  },
};

/** KServe model metadata in the shape the TF Serving clients report (one serving_default signature). */
function metadataFromKServe(meta: KServeModelMetadata): ModelMetadata {
  const tensors = (list: KServeModelMetadata['inputs']): SignatureInfo['inputs'] =>
    Object.fromEntries(
      list.map((t) => {
        const dtype = isKServeDatatype(t.datatype) ? dtypeOfDatatype(t.datatype) : undefined;
        return [
          t.name,
          { name: t.name, dtype, tfDtype: dtype ? tfDataTypeName(dtype) : t.datatype, shape: t.shape },
        ];
      }),
    );
  const version = meta.versions.length === 1 ? Number(meta.versions[0]) : undefined;
  return {
    model: { name: meta.name, version },
    signatures: {
      serving_default: { inputs: tensors(meta.inputs), outputs: tensors(meta.outputs), methodName: '' },
    },
  };
}

function describeInput(signature: SignatureInfo, alias: string): string {
  const t = signature.inputs[alias]!;
  return `(${t.tfDtype} ${t.shape === undefined ? 'unknown rank' : `[${t.shape.join(',')}]`})`;
}

function inputAlias(signature: SignatureInfo, requested: string | undefined): string {
  const aliases = Object.keys(signature.inputs);
  if (requested !== undefined) {
    if (!aliases.includes(requested))
      throw new UsageError(`the model has no input '${requested}' (inputs: ${aliases.join(', ')})`);
    return requested;
  }
  if (aliases.length !== 1)
    throw new UsageError(`the model has ${aliases.length} inputs (${aliases.join(', ')}): pass --input-name`);
  return aliases[0]!;
}

function tensorsFromJson(
  text: string,
  signature: SignatureInfo,
  requested: string | undefined,
): Record<string, Tensor> {
  const json = parseTfsJsonText(text);
  const specs = Object.fromEntries(
    Object.entries(signature.inputs).map(([alias, t]) => [alias, { dtype: t.dtype ?? 'float32' }]),
  );
  if (typeof json === 'object' && json !== null && !Array.isArray(json)) {
    const body = parseTfsPredictBody(json);
    return tfsJsonToTensors(body.format, body.value, specs);
  }
  const alias = inputAlias(signature, requested);
  return { [alias]: fromNested(json, specs[alias]!.dtype) };
}

function imageOptionsFrom(values: Parameters<typeof stringOption>[0]): ImageToTensorOptions {
  const out: { -readonly [K in keyof ImageToTensorOptions]: ImageToTensorOptions[K] } = {};
  const size = stringOption(values, 'size');
  if (size !== undefined) Object.assign(out, parseSize(size));
  const resize = choiceOption(values, 'resize', ['stretch', 'crop', 'letterbox'] as const);
  if (resize) out.resize = resize;
  const layout = choiceOption(values, 'layout', ['NCHW', 'NHWC'] as const);
  if (layout) out.layout = layout;
  const dtype = choiceOption(values, 'dtype', ['float32', 'uint8'] as const);
  if (dtype) out.dtype = dtype;
  const order = choiceOption(values, 'channel-order', ['RGB', 'BGR'] as const);
  if (order) out.channelOrder = order;
  if (flag(values, 'grayscale')) out.channels = 1;
  const scale = numberOption(values, 'scale');
  if (scale !== undefined) out.scale = scale;
  const mean = numberListOption(values, 'mean');
  if (mean) out.mean = mean;
  const std = numberListOption(values, 'std');
  if (std) out.std = std;
  return out;
}

interface RenderOptions {
  readonly task: 'auto' | 'classify' | 'detect' | 'raw';
  readonly topK: number;
  readonly threshold: number;
  readonly softmax: 'auto' | 'on' | 'off';
  readonly labels?: Labels;
  readonly labelMap?: Labels;
  readonly original?: { width: number; height: number };
}

function isTfod(outputs: Readonly<Record<string, Tensor>>): boolean {
  return ['detection_boxes', 'detection_scores', 'detection_classes'].every((k) => Object.hasOwn(outputs, k));
}

function classifierOutput(outputs: Readonly<Record<string, Tensor>>): Tensor | undefined {
  const list = Object.values(outputs);
  const t = list[0];
  if (list.length !== 1 || t === undefined || isStringData(t.data)) return undefined;
  const classes = t.shape[t.shape.length - 1] ?? 0;
  return classes >= 2 && t.data.length === classes ? t : undefined;
}

/** Renders a predict result as text and JSON according to the task. */
export function render(result: PredictResult, options: RenderOptions): Rendered {
  const outputs = result.outputs;
  const task =
    options.task === 'auto'
      ? isTfod(outputs)
        ? 'detect'
        : classifierOutput(outputs)
          ? 'classify'
          : 'raw'
      : options.task;
  if (task === 'detect') {
    const [result] = decodeDetections(
      outputs,
      { kind: 'detection', scoreThreshold: 0 },
      options.labelMap ?? options.labels,
      options.original,
    );
    const all = result?.detections ?? [];
    const shown = all.filter((d) => d.score >= options.threshold);
    return {
      text: `${shown.length} detection${shown.length === 1 ? '' : 's'} with score >= ${options.threshold.toFixed(2)} (of ${all.length})\n${shown.map(formatDetection).join('\n')}`,
      json: { task, detections: shown },
    };
  }
  if (task === 'classify') {
    const t = classifierOutput(outputs) ?? Object.values(outputs)[0];
    if (t === undefined) throw new Error('the model returned no outputs');
    const [top] = classifyTopK(
      t.shape.length > 2 ? { ...t, shape: [t.shape.at(-1)!] } : t,
      {
        kind: 'classification',
        topK: options.topK,
        softmax: options.softmax === 'on' ? true : options.softmax === 'off' ? false : 'auto',
      },
      options.labels,
    );
    const classes = top ?? [];
    return {
      text: `top ${classes.length} of ${t.shape[t.shape.length - 1] ?? 0} classes\n${classes.map(formatClass).join('\n')}`,
      json: { task, classes },
    };
  }
  const summary = Object.entries(outputs).map(([name, t]) => {
    const data = t.data;
    const head = isStringData(data)
      ? data.slice(0, 8).map((b) => new TextDecoder().decode(b))
      : Array.from(data.subarray(0, 8) as ArrayLike<number | bigint>, (v) =>
          typeof v === 'bigint' ? v.toString() : v,
        );
    return { name, dtype: t.dtype, shape: t.shape, elements: data.length, head };
  });
  return {
    text: `${summary.length} output${summary.length === 1 ? '' : 's'}\n${summary.map((s) => `  ${s.name}  ${s.dtype} [${s.shape.join(',')}]  ${s.head.map((v) => (typeof v === 'number' ? Number(v.toPrecision(6)) : v)).join(', ')}${s.elements > s.head.length ? ', ...' : ''}`).join('\n')}`,
    json: { task: 'raw', outputs: summary },
  };
}

function formatClass(c: ClassScore, rank: number): string {
  return `  ${String(rank + 1).padStart(2)}. ${String(c.class_id).padStart(4)}  ${(c.label ?? `class ${c.class_id}`).padEnd(40)} ${c.score.toFixed(4)}`;
}

function formatDetection(d: Detection): string {
  const name = d.label ?? `class ${d.class_id}`;
  const { ymin, xmin, ymax, xmax } = d.box;
  const box = `[ymin ${ymin.toFixed(3)} xmin ${xmin.toFixed(3)} ymax ${ymax.toFixed(3)} xmax ${xmax.toFixed(3)}]`;
  const p = d.box_pixels;
  const px = p === undefined ? '' : `  x ${p.xmin}-${p.xmax} y ${p.ymin}-${p.ymax} px`;
  return `  ${name.padEnd(16)} ${d.score.toFixed(2)}  ${box}${px}`;
}

function isDetectionResult(v: unknown): v is DetectionResult {
  return typeof v === 'object' && v !== null && Array.isArray((v as { detections?: unknown }).detections);
}

/**
 * Renders an /invocations answer: detections (`{"predictions": [{num_detections,
 * detections}]}`) as a table, lists of {label|class|index, score|probability} (or
 * [label, score] pairs, or {"predictions": ...} around them) as a ranked list, anything
 * else as indented JSON.
 */
export function renderInvocation(json: unknown, labels: Labels | undefined): Rendered {
  const predictions = (json as { predictions?: unknown } | null)?.predictions;
  if (Array.isArray(predictions) && predictions.length > 0 && predictions.every(isDetectionResult)) {
    const lines = predictions.flatMap((p, i) => [
      `${predictions.length > 1 ? `instance ${i}: ` : ''}${p.detections.length} detection${p.detections.length === 1 ? '' : 's'}`,
      ...p.detections.map(formatDetection),
    ]);
    return { text: `/invocations: ${lines.join('\n')}`, json };
  }
  const unwrap = (v: unknown): unknown => {
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      for (const key of ['predictions', 'classes', 'results', 'top_k', 'topk'])
        if (Array.isArray(o[key])) return o[key];
    }
    return v;
  };
  let list = unwrap(json);
  if (
    Array.isArray(list) &&
    list.length === 1 &&
    Array.isArray(list[0]) &&
    list[0].length > 0 &&
    typeof list[0][0] === 'object'
  )
    list = list[0];
  const rows: { label: string; score: number }[] = [];
  if (Array.isArray(list)) {
    for (const item of list) {
      if (Array.isArray(item) && item.length === 2 && typeof item[1] === 'number')
        rows.push({ label: String(item[0]), score: item[1] });
      else if (typeof item === 'object' && item !== null) {
        const o = item as Record<string, unknown>;
        const score = [o.score, o.probability, o.prob, o.confidence].find(
          (v): v is number => typeof v === 'number',
        );
        const index = [o.index, o.class_id, o.id].find((v): v is number => typeof v === 'number');
        const name =
          [o.label, o.class, o.name, o.display_name].find((v): v is string => typeof v === 'string') ??
          (index !== undefined ? (labels?.get(index) ?? `class ${index}`) : undefined);
        if (score !== undefined && name !== undefined) rows.push({ label: name, score });
      }
    }
  }
  if (rows.length === 0 || !Array.isArray(list) || rows.length !== list.length) {
    return { text: JSON.stringify(json, null, 2), json };
  }
  return {
    text: `/invocations: ${rows.length} result${rows.length === 1 ? '' : 's'}\n${rows.map((r, i) => `  ${String(i + 1).padStart(2)}. ${r.label.padEnd(40)} ${r.score.toFixed(4)}`).join('\n')}`,
    json,
  };
}
