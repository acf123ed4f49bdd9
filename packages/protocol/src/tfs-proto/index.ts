// `@visionserve/protocol/tfs-proto`: TF Serving's protobuf messages (our own wire-compatible
// .proto files, generated with protobuf-es) and the TensorProto codecs with their fast paths.
// Kept out of the main entry so that JSON-only users never load protobuf.
export * from './tf-tensor-codec.js';
export * from './tf-tensor-view.js';
export * from './wire-bytes.js';
export * from './predict-response-decoder.js';
export * from './predict-request-writer.js';
export * from './tf-example-proto.js';
export { denseExamplesToTensors } from './tf-example-wire.js';
export * from '../gen/tensorflow/core/example/example_pb.js';
export * from '../gen/tensorflow/core/example/feature_pb.js';
export * from '../gen/tensorflow/core/framework/tensor_pb.js';
export * from '../gen/tensorflow/core/framework/tensor_shape_pb.js';
export * from '../gen/tensorflow/core/framework/types_pb.js';
export { Code as TfErrorCode } from '../gen/tensorflow/core/protobuf/error_codes_pb.js';
export * from '../gen/tensorflow/core/protobuf/meta_graph_pb.js';
export * from '../gen/tensorflow_serving/apis/classification_pb.js';
export * from '../gen/tensorflow_serving/apis/get_model_metadata_pb.js';
export * from '../gen/tensorflow_serving/apis/get_model_status_pb.js';
export * from '../gen/tensorflow_serving/apis/inference_pb.js';
export * from '../gen/tensorflow_serving/apis/input_pb.js';
export * from '../gen/tensorflow_serving/apis/model_management_pb.js';
export * from '../gen/tensorflow_serving/apis/model_pb.js';
export * from '../gen/tensorflow_serving/apis/model_service_pb.js';
export * from '../gen/tensorflow_serving/apis/predict_pb.js';
export * from '../gen/tensorflow_serving/apis/prediction_log_pb.js';
export * from '../gen/tensorflow_serving/apis/prediction_service_pb.js';
export * from '../gen/tensorflow_serving/apis/regression_pb.js';
export * from '../gen/tensorflow_serving/config/file_system_storage_path_source_pb.js';
export * from '../gen/tensorflow_serving/config/model_server_config_pb.js';
export * from '../gen/tensorflow_serving/util/status_pb.js';
export * from '../gen/visionserve/predict_request_view_pb.js';
export * from './predict-response-writer.js';
export * from '../gen/tensorflow_serving/config/monitoring_config_pb.js';
export * from '../gen/tensorflow_serving/config/ssl_config_pb.js';
export * from '../gen/tensorflow_serving/servables/tensorflow/session_bundle_config_pb.js';
