/** Frame streams over gRPC (`visionserve.stream.FrameStreamService`): the generated messages. */
export * from '../gen/visionserve/frame_stream_pb.js';

/** The service's full name, as gRPC paths spell it. */
export const FRAME_STREAM_SERVICE = 'visionserve.stream.FrameStreamService';
export * from './frame-tensor.js';
