export { createSageMakerApi, type SageMakerApiOptions } from './sagemaker-api.js';
export {
  createSageMakerInvoker,
  type ExecutionParameters,
  type SageMakerInvoker,
  type SageMakerInvokerOptions,
} from './sagemaker-invoker.js';
export type { InvocationCall, InvocationRequest, InvocationResponse } from './serve-invocation.js';
