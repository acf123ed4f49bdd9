export { createSageMakerApi, type SageMakerApiOptions } from './sagemaker-api.js';
