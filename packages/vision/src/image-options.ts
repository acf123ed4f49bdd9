/** How an encoded image becomes a model input tensor (no sharp here: pure data). */

/** How a decoded image becomes a tensor. */
export interface ImageToTensorOptions {
  /** Target width and height in pixels. Omit both to keep the image's own size (e.g. TF-OD models). */
  readonly width?: number;
  readonly height?: number;
  /**
   * - `stretch`: resize to exactly width×height, ignoring the aspect ratio.
   * - `crop`: resize the shorter side to `resizeShorter`, then take the centre width×height.
   * - `letterbox`: fit inside width×height keeping the aspect ratio, pad bottom/right with `padValue`.
   * Default `stretch`.
   */
  readonly resize?: 'stretch' | 'crop' | 'letterbox';
  /** Shorter side before a centre crop, in pixels. Default round(max(width, height) × 256 / 224). */
  readonly resizeShorter?: number;
  /** Pad value (0-255) for letterbox. Default 114 (YOLOX). */
  readonly padValue?: number;
  /** Dimension order. Default NHWC. */
  readonly layout?: 'NCHW' | 'NHWC';
  /** float32 applies scale, mean and std; uint8 passes the raw pixels. Default float32. */
  readonly dtype?: 'float32' | 'uint8';
  /** Channel order. Default RGB. */
  readonly channelOrder?: 'RGB' | 'BGR';
  /** 3 (colour) or 1 (grayscale). Default 3. */
  readonly channels?: 1 | 3;
  /** Multiplier applied to 0-255 pixels before mean/std. Default 1/255. */
  readonly scale?: number;
  /** Per-channel mean subtracted after scaling, in the output channel order. Default zeros. */
  readonly mean?: readonly number[];
  /** Per-channel std divided after the mean. Default ones. */
  readonly std?: readonly number[];
  /** Largest accepted image in pixels (width × height), checked before decoding. Default 40,000,000. */
  readonly maxInputPixels?: number;
}

/** Ready-made settings for common model families. */
export const IMAGE_PRESETS = {
  /** ImageNet classifiers (torchvision / ONNX zoo MobileNetV2, ResNet): resize 256, centre crop 224, NCHW, mean/std. */
  imagenet: {
    width: 224,
    height: 224,
    resize: 'crop',
    layout: 'NCHW',
    dtype: 'float32',
    scale: 1 / 255,
    mean: [0.485, 0.456, 0.406],
    std: [0.229, 0.224, 0.225],
  },
  /** TF Object Detection API detectors: the image as is, uint8 NHWC RGB [1, H, W, 3]. */
  tfod: { layout: 'NHWC', dtype: 'uint8' },
  /** Raw YOLOX: 416 letterbox padded with 114, BGR, NCHW float 0-255. */
  yolox: {
    width: 416,
    height: 416,
    resize: 'letterbox',
    padValue: 114,
    layout: 'NCHW',
    dtype: 'float32',
    channelOrder: 'BGR',
    scale: 1,
  },
  /** MNIST: 28×28 grayscale, NCHW, divided by 255. */
  mnist: {
    width: 28,
    height: 28,
    resize: 'stretch',
    layout: 'NCHW',
    dtype: 'float32',
    channels: 1,
    scale: 1 / 255,
  },
} as const satisfies Record<string, ImageToTensorOptions>;

export type ImagePresetName = keyof typeof IMAGE_PRESETS;
