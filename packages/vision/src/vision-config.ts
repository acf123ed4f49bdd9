/**
 * `<model base path>/visionserve.json`: how an encoded image becomes the model's input
 * and how its outputs become labelled results. Pure schema and validation; the server's
 * repository reads the file (and the labels it names) with each model version.
 */
import { invalidArgument } from '@visionserve/protocol';
import type { ImageToTensorOptions } from './image-options.js';
import type { Labels, LabelsFormat } from './labels.js';

/** Name of the file in a model's base directory. */
export const VISION_CONFIG_FILE = 'visionserve.json';

/** Image decoding and layout, plus the signature input it feeds. */
export interface ImageConfig extends ImageToTensorOptions {
  /** Signature input alias the image tensor goes to. Default: the signature's only input. */
  readonly input?: string;
}

export interface ClassificationPostprocess {
  readonly kind: 'classification';
  /** Output alias holding scores `[batch, classes]` (or `[classes]`). Default: the only output. */
  readonly output?: string;
  /** Apply softmax to the scores first (for logits); `auto` unless a row already sums to 1. Default false. */
  readonly softmax?: boolean | 'auto';
  /** How many classes to return per instance, best first. Default 5. */
  readonly topK?: number;
  /** Labels file, relative to the model's base directory. Default: none (labels are omitted). */
  readonly labels?: string;
  /** Default: `label_map` for `.pbtxt` files, else `lines`. */
  readonly labelsFormat?: LabelsFormat;
  /** Added to a class index before the label lookup (e.g. -1 for a 1001-class model with background at 0 and a 1000-line file). Default 0. */
  readonly labelOffset?: number;
}

export interface DetectionPostprocess {
  readonly kind: 'detection';
  /** Output aliases, TF Object Detection API names by default. */
  readonly outputs?: {
    /** `[batch, N, 4]` boxes `[ymin, xmin, ymax, xmax]`, normalised to [0, 1]. Default "detection_boxes". */
    readonly boxes?: string;
    /** `[batch, N]` class ids (float or int). Default "detection_classes". */
    readonly classes?: string;
    /** `[batch, N]` scores, descending. Default "detection_scores". */
    readonly scores?: string;
    /** `[batch]` count of valid rows. Default "num_detections"; when absent from the signature all N rows are read. */
    readonly numDetections?: string;
  };
  /** Detections scoring below this are dropped. Default 0.5. */
  readonly scoreThreshold?: number;
  /** Most detections returned per instance. Default 100. */
  readonly maxDetections?: number;
  /** Labels file (relative to the model's base directory) mapping class ids to names. Default: none. */
  readonly labels?: string;
  /** Default: `label_map` for `.pbtxt` files, else `lines`. */
  readonly labelsFormat?: LabelsFormat;
  /** Added to a class id before the label lookup (e.g. -1 for 1-based ids with a 0-based `lines` file). Default 0. */
  readonly labelOffset?: number;
}

export type Postprocess = ClassificationPostprocess | DetectionPostprocess;

/** Object tracking on streams of frames (tracker.ts). */
export interface TrackerConfig {
  /** `bytetrack` (two-stage, default) or `iou` (one stage). */
  readonly kind?: 'bytetrack' | 'iou';
  /** Score from which a detection is "high": matched first, and may start a track. Default 0.5. */
  readonly highScore?: number;
  /** Detections below this are ignored by the tracker (no track_id). Default 0.1. */
  readonly lowScore?: number;
  /** Least IoU of a high-score detection with a track's predicted box. Default 0.3. */
  readonly iouThreshold?: number;
  /** Least IoU of a low-score detection with a track's predicted box. Default 0.5. */
  readonly lowIouThreshold?: number;
  /** Frames a track survives unseen (its id comes back if the object does). Default 30. */
  readonly maxAge?: number;
  /** Match boxes only to tracks of the same class. Default true. */
  readonly classAware?: boolean;
}

/**
 * The signature that takes encoded images (TF Serving's `image_bytes` idiom): a DT_STRING
 * input of JPEG/PNG/WebP bytes, decoded and laid out with `image`, then run by `base`.
 */
export interface ImageBytesSignature {
  /** Signature name. Default "serving_bytes". */
  readonly name?: string;
  /** Its input key. Default "image_bytes". */
  readonly input?: string;
  /** The tensor signature that runs the decoded images. Default "serving_default". */
  readonly base?: string;
  /**
   * Serve it as serving_default too (clients that name no signature send images); the
   * tensor signature stays reachable by its own name when that is not serving_default,
   * else as "serving_tensor". Default false.
   */
  readonly default?: boolean;
}

/** The contents of visionserve.json. */
export interface VisionConfig {
  /** Enables encoded-image requests (application/x-image, image/jpeg, image/png, image/webp on /invocations). */
  readonly image?: ImageConfig;
  /** Built-in post-processing of image requests; without it the raw outputs are returned. */
  readonly postprocess?: Postprocess;
  /**
   * The encoded-image signature, offered whenever `image` is set (defaults above); `false`
   * turns it off.
   */
  readonly imageBytesSignature?: ImageBytesSignature | false;
  /** Answer repeated predicts from the server's response cache (--response_cache_bytes). Default false. */
  readonly responseCache?: boolean;
  /**
   * Object tracking on streams of frames (`visionserve video`, frame streams) of a detection
   * model: each box gets a `track_id` stable across frames. Absent: no tracking. Single
   * requests are never tracked.
   */
  readonly tracking?: TrackerConfig;
}

/** A model's vision assets: its visionserve.json and the labels file that names. */
export interface VisionAssets {
  readonly config: VisionConfig | undefined;
  /** Class id -> name, from `postprocess.labels`. */
  readonly labels: Labels | undefined;
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

class Reader {
  constructor(
    private readonly obj: Json,
    private readonly where: string,
  ) {}

  known(keys: readonly string[]): void {
    for (const k of Object.keys(this.obj)) {
      if (!keys.includes(k)) {
        throw invalidArgument(`${this.where}: unknown key "${k}" (expected one of: ${keys.join(', ')})`);
      }
    }
  }

  /** The raw value of a key (undefined when absent). */
  key(key: string): unknown {
    return this.get(key);
  }

  private get(key: string): unknown {
    return Object.hasOwn(this.obj, key) ? this.obj[key] : undefined;
  }

  string(key: string): string | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '')
      throw invalidArgument(`${this.where}.${key} must be a non-empty string`);
    return v;
  }

  oneOf<T extends string>(key: string, values: readonly T[]): T | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) {
      throw invalidArgument(`${this.where}.${key} must be one of ${values.join(', ')}`);
    }
    return v as T;
  }

  number(key: string, min: number, max: number, integer = false): number | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (
      typeof v !== 'number' ||
      !Number.isFinite(v) ||
      v < min ||
      v > max ||
      (integer && !Number.isInteger(v))
    ) {
      throw invalidArgument(
        `${this.where}.${key} must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}]`,
      );
    }
    return v;
  }

  bool(key: string): boolean | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') throw invalidArgument(`${this.where}.${key} must be true or false`);
    return v;
  }

  numbers(key: string, length: number): number[] | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (
      !Array.isArray(v) ||
      v.length !== length ||
      !v.every((x) => typeof x === 'number' && Number.isFinite(x))
    ) {
      throw invalidArgument(`${this.where}.${key} must be a list of ${length} numbers`);
    }
    return v as number[];
  }

  object(key: string): Reader | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (!isObject(v)) throw invalidArgument(`${this.where}.${key} must be an object`);
    return new Reader(v, `${this.where}.${key}`);
  }
}

/** `T` with every property that may be undefined turned into an optional one. */
type Defined<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
};

/** Drops undefined values so optional properties stay absent (exactOptionalPropertyTypes). */
function defined<T extends object>(o: T): Defined<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Defined<T>;
}

const MAX_SIDE = 65_535;

function readImage(r: Reader): ImageConfig {
  r.known([
    'input',
    'width',
    'height',
    'resize',
    'resizeShorter',
    'padValue',
    'layout',
    'dtype',
    'channelOrder',
    'channels',
    'scale',
    'mean',
    'std',
    'maxInputPixels',
  ]);
  const width = r.number('width', 1, MAX_SIDE, true);
  const height = r.number('height', 1, MAX_SIDE, true);
  if ((width === undefined) !== (height === undefined)) {
    throw invalidArgument('visionserve.json image: give both width and height, or neither');
  }
  const channels = r.number('channels', 1, 3, true);
  if (channels === 2) throw invalidArgument('visionserve.json image.channels must be 1 or 3');
  const c = channels ?? 3;
  return defined({
    input: r.string('input'),
    width,
    height,
    resize: r.oneOf('resize', ['stretch', 'crop', 'letterbox'] as const),
    resizeShorter: r.number('resizeShorter', 1, MAX_SIDE, true),
    padValue: r.number('padValue', 0, 255, true),
    layout: r.oneOf('layout', ['NCHW', 'NHWC'] as const),
    dtype: r.oneOf('dtype', ['float32', 'uint8'] as const),
    channelOrder: r.oneOf('channelOrder', ['RGB', 'BGR'] as const),
    channels: channels as 1 | 3 | undefined,
    scale: r.number('scale', -1e9, 1e9),
    mean: r.numbers('mean', c),
    std: r.numbers('std', c),
    maxInputPixels: r.number('maxInputPixels', 1, 2 ** 31, true),
  });
}

function readPostprocess(r: Reader): Postprocess {
  const kind = r.oneOf('kind', ['classification', 'detection'] as const);
  const labelKeys = ['labels', 'labelsFormat', 'labelOffset'];
  const labels = (): Pick<ClassificationPostprocess, 'labels' | 'labelsFormat' | 'labelOffset'> =>
    defined({
      labels: r.string('labels'),
      labelsFormat: r.oneOf('labelsFormat', ['lines', 'synset', 'label_map'] as const),
      labelOffset: r.number('labelOffset', -1e6, 1e6, true),
    });
  if (kind === 'classification') {
    r.known(['kind', 'output', 'softmax', 'topK', ...labelKeys]);
    return defined({
      kind,
      output: r.string('output'),
      softmax: r.key('softmax') === 'auto' ? ('auto' as const) : r.bool('softmax'),
      topK: r.number('topK', 1, 100_000, true),
      ...labels(),
    });
  }
  if (kind === 'detection') {
    r.known(['kind', 'outputs', 'scoreThreshold', 'maxDetections', ...labelKeys]);
    const o = r.object('outputs');
    o?.known(['boxes', 'classes', 'scores', 'numDetections']);
    return defined({
      kind,
      outputs:
        o === undefined
          ? undefined
          : defined({
              boxes: o.string('boxes'),
              classes: o.string('classes'),
              scores: o.string('scores'),
              numDetections: o.string('numDetections'),
            }),
      scoreThreshold: r.number('scoreThreshold', 0, 1),
      maxDetections: r.number('maxDetections', 1, 100_000, true),
      ...labels(),
    });
  }
  throw invalidArgument('visionserve.json postprocess.kind must be "classification" or "detection"');
}

function readTracking(r: Reader): TrackerConfig {
  r.known(['kind', 'highScore', 'lowScore', 'iouThreshold', 'lowIouThreshold', 'maxAge', 'classAware']);
  const config = defined({
    kind: r.oneOf('kind', ['bytetrack', 'iou'] as const),
    highScore: r.number('highScore', 0, 1),
    lowScore: r.number('lowScore', 0, 1),
    iouThreshold: r.number('iouThreshold', 0, 1),
    lowIouThreshold: r.number('lowIouThreshold', 0, 1),
    maxAge: r.number('maxAge', 0, 100_000, true),
    classAware: r.bool('classAware'),
  });
  if ((config.lowScore ?? 0.1) > (config.highScore ?? 0.5)) {
    throw invalidArgument('visionserve.json tracking.lowScore must not exceed tracking.highScore');
  }
  return config;
}

/** Validates parsed visionserve.json; unknown keys and bad values are INVALID_ARGUMENT. */
export function parseVisionConfig(json: unknown): VisionConfig {
  if (!isObject(json)) throw invalidArgument('visionserve.json must hold a JSON object');
  const r = new Reader(json, 'visionserve.json');
  r.known(['image', 'postprocess', 'imageBytesSignature', 'responseCache', 'tracking']);
  const image = r.object('image');
  const post = r.object('postprocess');
  const tracking = r.object('tracking');
  if (tracking !== undefined && post?.key('kind') !== 'detection') {
    throw invalidArgument('visionserve.json tracking needs a detection postprocess');
  }
  let bytesSignature: ImageBytesSignature | undefined;
  const bytesOff = r.key('imageBytesSignature') === false;
  if (bytesOff) bytesSignature = undefined;
  else {
    const b = r.object('imageBytesSignature');
    b?.known(['name', 'input', 'base', 'default']);
    bytesSignature =
      b === undefined
        ? undefined
        : defined({
            name: b.string('name'),
            input: b.string('input'),
            base: b.string('base'),
            default: b.bool('default'),
          });
  }
  return defined({
    image: image === undefined ? undefined : readImage(image),
    postprocess: post === undefined ? undefined : readPostprocess(post),
    imageBytesSignature: bytesOff ? (false as const) : bytesSignature,
    responseCache: r.bool('responseCache'),
    tracking: tracking === undefined ? undefined : readTracking(tracking),
  });
}
