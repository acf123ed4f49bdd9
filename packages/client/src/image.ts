// `@visionserve/client/image`: the image helper of @visionserve/vision under the client's
// name, so that client users have one import. Needs the optional native module sharp.
export * from '@visionserve/vision/image';
export { IMAGE_PRESETS, type ImagePresetName } from '@visionserve/vision';
