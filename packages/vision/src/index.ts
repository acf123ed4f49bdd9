// `@visionserve/vision`: the one copy of visionserve's vision code. No sharp here: image
// decoding is in `@visionserve/vision/image`, which loads sharp lazily.
export * from './image-options.js';
export * from './labels.js';
export * from './classification.js';
export * from './detection.js';
export * from './vision-config.js';
export * from './presets.js';
export * from './tracker.js';
