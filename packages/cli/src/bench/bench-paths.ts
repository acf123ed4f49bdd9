/** The serving paths the latency suite measures, in table order, with what each one measures. */

export type PathId =
  | 'floor'
  | 'image-floor'
  | 'in-process'
  | 'grpc-tensor-content'
  | 'grpc-typed'
  | 'kserve-http'
  | 'kserve-grpc'
  | 'rest-json'
  | 'invocations';

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
    id: 'kserve-grpc',
    kind: 'served',
    label: 'KServe v2 gRPC',
    description: 'inference.GRPCInferenceService/ModelInfer with raw_input_contents / raw_output_contents',
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
    label: '/invocations (image; ≙ REST b64)',
    description:
      'POST /invocations with the JPEG (application/x-image), top-k JSON out. Stands for TF Serving\'s REST {"b64": ...} idiom (encoded image in, server decodes), which needs a string-input model that ONNX cannot express',
  },
];

export const PATH_IDS: readonly PathId[] = PATHS.map((p) => p.id);

export function isFloorPath(id: PathId): boolean {
  return PATHS.find((p) => p.id === id)?.kind === 'floor';
}
