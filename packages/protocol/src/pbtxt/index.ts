// `@visionserve/protocol/pbtxt`: the protobuf text format (TF Serving's config files, TF-OD
// label maps) as a generic tree, and typed readers with positioned errors.
export * from './pbtxt.js';
export * from './pbtxt-reader.js';
export * from './text-message.js';
