export {
  createKServeService,
  KSERVE_EXTENSIONS,
  type KServeModelRef,
  type KServeService,
  type KServeServiceOptions,
} from './kserve-service.js';
export type { ModelControlMode, ModelRoots } from './repository-control.js';
export { createKServeHttpApi, type KServeHttpApiOptions } from './http/kserve-http-api.js';
export {
  createKServeGrpcService,
  KSERVE_GRPC_SERVICE,
  type KServeGrpcServiceOptions,
} from './grpc/kserve-grpc-service.js';
