/**
 * visionserve.json for the models the project tests and benchmarks with. The ImageNet
 * numbers come from IMAGE_PRESETS, so they are written once.
 */
import { IMAGE_PRESETS } from './image-options.js';
import type { VisionConfig } from './vision-config.js';

/**
 * The ONNX-zoo MobileNetV2 (ImageNet): resize 256 + centre crop 224, ImageNet mean/std,
 * NCHW float, softmax top-5 with the synset labels file `imagenet_synset.txt` beside the
 * version directories.
 */
export const MOBILENET_V2_VISION_CONFIG = {
  image: { ...IMAGE_PRESETS.imagenet, resizeShorter: 256, channelOrder: 'RGB' },
  postprocess: {
    kind: 'classification',
    softmax: true,
    topK: 5,
    labels: 'imagenet_synset.txt',
    labelsFormat: 'synset',
  },
} as const satisfies VisionConfig;

/**
 * A TF Object Detection API style detector (uint8 NHWC RGB at the image's own size),
 * labels from the COCO label map `mscoco_label_map.pbtxt`.
 */
export const TFOD_DETECTOR_VISION_CONFIG = {
  image: { ...IMAGE_PRESETS.tfod, input: 'input_tensor', channelOrder: 'RGB' },
  postprocess: {
    kind: 'detection',
    labels: 'mscoco_label_map.pbtxt',
    scoreThreshold: 0.5,
  },
} as const satisfies VisionConfig;
