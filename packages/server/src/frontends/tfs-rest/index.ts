export { createTfsRestApi, type TfsRestApiOptions } from './tfs-rest-api.js';
