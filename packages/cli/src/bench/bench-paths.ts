/** The serving paths the latency suite measures, in table order, with what each one measures. */

export type PathId =
  | 'floor'
  | 'image-floor'
  | 'in-process'
  | 'grpc-tensor-content'
  | 'grpc-typed'
  | 'kserve-http'
  | 'kserve-json'
  | 'kserve-grpc'
  | 'grpc-tls'
  | 'kserve-https'
  | 'rest-json'
  | 'invocations'
  | 'rest-b64'
  | 'rest-b64-cached';

export interface PathInfo {
  readonly id: PathId;
  readonly label: string;
  readonly description: string;
  /**
   * `floor`: measured in a worker of the benchmark process, closed loop at concurrency 1,
   * before and after each round of the other paths (their medians are the references).
   */
  readonly kind: 'floor' | 'served';
}

export const PATHS: readonly PathInfo[] = [
  {
    id: 'floor',
    kind: 'floor',
    label: 'raw onnxruntime (floor)',
    description: 'session.run on a preloaded tensor in a worker thread, same SessionOptions as the server',
  },
  {
    id: 'image-floor',
    kind: 'floor',
    label: 'image floor (sharp + onnxruntime + top-5)',
    description:
      "the /invocations work without a server: @visionserve/vision's imageToTensor on the JPEG (sharp decode, resize, normalise), session.run and softmax top-5 with labels to JSON, in a worker thread with the server's SessionOptions",
  },
  {
    id: 'in-process',
    kind: 'served',
    label: 'in-process (core)',
    description:
      'InferenceService.predict called in the server process: queue, worker transfer, no transport',
  },
  {
    id: 'grpc-tensor-content',
    kind: 'served',
    label: 'gRPC tensor_content',
    description:
      'Predict with tensor_content both ways (server started with --enable_serialization_as_tensor_content)',
  },
  {
    id: 'grpc-typed',
    kind: 'served',
    label: 'gRPC typed (float_val)',
    description:
      'Predict with typed values both ways (int_val/float_val requests, float_val responses: TF Serving defaults)',
  },
  {
    id: 'kserve-http',
    kind: 'served',
    label: 'KServe v2 HTTP binary',
    description:
      'POST /v2/models/{m}/infer with the binary tensor data extension both ways (JSON header, raw tensor bytes after it)',
  },
  {
    id: 'kserve-json',
    kind: 'served',
    label: 'KServe v2 HTTP JSON',
    description:
      'POST /v2/models/{m}/infer with JSON `data` both ways (no binary tensor data: tritonclient.http with binary_data=False)',
  },
  {
    id: 'kserve-grpc',
    kind: 'served',
    label: 'KServe v2 gRPC',
    description: 'inference.GRPCInferenceService/ModelInfer with raw_input_contents / raw_output_contents',
  },
  {
    id: 'grpc-tls',
    kind: 'served',
    label: 'gRPC tensor_content over TLS',
    description:
      'the gRPC tensor_content request over TLS 1.3 (a server with --ssl_config_file and --enable_serialization_as_tensor_content; a throwaway CA made with openssl, trusted by the client)',
  },
  {
    id: 'kserve-https',
    kind: 'served',
    label: 'KServe v2 HTTP binary over TLS',
    description: 'the KServe v2 HTTP binary request over TLS 1.3, to the same TLS server',
  },
  {
    id: 'rest-json',
    kind: 'served',
    label: 'REST JSON',
    description: 'POST :predict with {"instances": ...}, answer {"predictions": ...}, decoded into tensors',
  },
  {
    id: 'invocations',
    kind: 'served',
    label: '/invocations (image, top-k out)',
    description:
      'POST /invocations with the JPEG (application/x-image), top-k JSON out (the server decodes the image and applies visionserve.json post-processing)',
  },
  {
    id: 'rest-b64',
    kind: 'served',
    label: 'REST b64 (serving_bytes)',
    description:
      'POST :predict with {"signature_name": "serving_bytes", "instances": [{"b64": JPEG}]}: TF Serving\'s image_bytes idiom, the server decodes and preprocesses; raw outputs out, decoded into tensors',
  },
  {
    id: 'rest-b64-cached',
    kind: 'served',
    label: 'REST b64, response cache hit',
    description:
      'the same request to a twin of the model with "responseCache": true (server --response_cache_bytes): after the first, every request is answered from the cache',
  },
];

export const PATH_IDS: readonly PathId[] = PATHS.map((p) => p.id);

export function isFloorPath(id: PathId): boolean {
  return PATHS.find((p) => p.id === id)?.kind === 'floor';
}
