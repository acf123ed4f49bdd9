export {
  createTfsGrpcServices,
  MODEL_SERVICE,
  PREDICTION_SERVICE,
  type TfsGrpcFrontendOptions,
} from './tfs-grpc-frontend.js';
