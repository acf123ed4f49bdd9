export {
  startGrpcServer,
  MAX_GRPC_MESSAGE_BYTES,
  DEFAULT_RECEIVE_WINDOW_BYTES,
  DEFAULT_MAX_FRAME_BYTES,
  type GrpcServerOptions,
  type GrpcTransport,
  type RunningGrpcServer,
} from './grpc-server.js';
export type {
  GrpcCallContext,
  GrpcMethod,
  GrpcService,
  UnaryHandler,
  AlignmentProbe,
} from './grpc-service.js';
