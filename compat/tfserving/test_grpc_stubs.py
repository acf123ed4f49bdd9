"""The official tensorflow-serving-api stubs against visionserve, unchanged."""
import numpy as np
import grpc
import pytest
import tensorflow as tf
from google.protobuf import wrappers_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    classification_pb2,
)
from tensorflow_serving.config import model_server_config_pb2

from conftest import IMAGES

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def mobilenet_input():
    img = tf.io.decode_jpeg(tf.io.read_file(str(IMAGES / "cat_tabby.jpg")), channels=3)
    img = tf.image.resize(tf.cast(img, tf.float32) / 255.0, (224, 224), method="bilinear").numpy()
    img = (img - MEAN) / STD
    return np.transpose(img, (2, 0, 1))[None].astype(np.float32)


def predict(server, request, timeout=30):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    return stub.Predict(request, timeout=timeout)


def test_predict_tensor_content_classifies_tabby(server):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "mobilenet"
    req.model_spec.signature_name = "serving_default"
    req.inputs["input"].CopyFrom(tf.make_tensor_proto(mobilenet_input()))
    assert req.inputs["input"].tensor_content  # make_tensor_proto packs tensor_content
    resp = predict(server, req)
    logits = tf.make_ndarray(resp.outputs["output"])
    assert logits.shape == (1, 1000)
    assert int(np.argmax(logits[0])) == 281
    assert resp.model_spec.name == "mobilenet"
    assert resp.model_spec.version.value == 1
    assert resp.model_spec.signature_name == "serving_default"


def test_predict_float_val_classifies_tabby(server):
    x = mobilenet_input()
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "mobilenet"
    t = req.inputs["input"]
    t.dtype = tf.float32.as_datatype_enum
    for d in x.shape:
        t.tensor_shape.dim.add(size=d)
    t.float_val.extend(x.ravel().tolist())
    resp = predict(server, req)
    out = resp.outputs["output"]
    assert len(out.float_val) == 1000  # typed values by default, as TF Serving answers
    assert int(np.argmax(np.array(out.float_val))) == 281


def test_detector_uint8_finds_persons_and_ball(server):
    img = tf.io.decode_jpeg(tf.io.read_file(str(IMAGES / "scene_soccer.jpg")), channels=3).numpy()[None]
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "detector"
    req.inputs["input_tensor"].CopyFrom(tf.make_tensor_proto(img, dtype=tf.uint8))
    req.output_filter.extend(["detection_classes", "detection_scores", "num_detections"])
    resp = predict(server, req)
    assert set(resp.outputs.keys()) == {"detection_classes", "detection_scores", "num_detections"}
    scores = tf.make_ndarray(resp.outputs["detection_scores"])[0]
    classes = tf.make_ndarray(resp.outputs["detection_classes"])[0]
    found = [int(c) for c, s in zip(classes, scores) if s > 0.5]
    assert found.count(1) == 3  # persons
    assert found.count(37) == 1  # sports ball


def test_get_model_metadata_signature_def(server):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    req = get_model_metadata_pb2.GetModelMetadataRequest()
    req.model_spec.name = "mobilenet"
    req.metadata_field.append("signature_def")
    resp = stub.GetModelMetadata(req, timeout=10)
    sigs = get_model_metadata_pb2.SignatureDefMap()
    assert resp.metadata["signature_def"].Unpack(sigs)
    sig = sigs.signature_def["serving_default"]
    assert sig.method_name == "tensorflow/serving/predict"
    assert sig.inputs["input"].dtype == tf.float32.as_datatype_enum
    assert [d.size for d in sig.inputs["input"].tensor_shape.dim] == [-1, 3, 224, 224]
    assert [d.size for d in sig.outputs["output"].tensor_shape.dim] == [-1, 1000]


def test_get_model_status(server):
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel)
    req = get_model_status_pb2.GetModelStatusRequest()
    req.model_spec.name = "mobilenet"
    resp = stub.GetModelStatus(req, timeout=10)
    assert len(resp.model_version_status) == 1
    st = resp.model_version_status[0]
    assert st.version == 1
    assert st.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert st.status.error_code == 0


def test_unknown_model_is_not_found(server):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "nope"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1,), np.float32)))
    with pytest.raises(grpc.RpcError) as err:
        predict(server, req)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_wrong_input_name_is_invalid_argument(server):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "mobilenet"
    req.inputs["images"].CopyFrom(tf.make_tensor_proto(mobilenet_input()))
    with pytest.raises(grpc.RpcError) as err:
        predict(server, req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "images" in err.value.details()


def test_specific_version_not_found(server):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "mobilenet"
    req.model_spec.version.CopyFrom(wrappers_pb2.Int64Value(value=7))
    req.inputs["input"].CopyFrom(tf.make_tensor_proto(mobilenet_input()))
    with pytest.raises(grpc.RpcError) as err:
        predict(server, req)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_classify_without_examples_is_invalid_argument(server):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = "mobilenet"
    with pytest.raises(grpc.RpcError) as err:
        stub.Classify(req, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "Input is empty."


def test_reload_config_replaces_model_set(server):
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel)
    req = model_management_pb2.ReloadConfigRequest()
    cfgs = req.config.model_config_list.config
    for name in ("mobilenet", "detector", "half_plus_two"):
        c = cfgs.add()
        c.name = name
        c.base_path = str(server.repo / name)
        c.model_platform = "onnx"
    resp = stub.HandleReloadConfigRequest(req, timeout=60)
    assert resp.status.error_code == 0

    preq = predict_pb2.PredictRequest()
    preq.model_spec.name = "half_plus_two"
    preq.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0, 2.0, 5.0], np.float32)))
    out = tf.make_ndarray(predict(server, preq).outputs["y"])
    assert out.tolist() == [2.5, 3.0, 4.5]

    # Replacing the set without the detector unloads it.
    req2 = model_management_pb2.ReloadConfigRequest()
    for name in ("mobilenet", "half_plus_two"):
        c = req2.config.model_config_list.config.add()
        c.name = name
        c.base_path = str(server.repo / name)
    assert stub.HandleReloadConfigRequest(req2, timeout=60).status.error_code == 0
    sreq = get_model_status_pb2.GetModelStatusRequest()
    sreq.model_spec.name = "detector"
    with pytest.raises(grpc.RpcError) as err:
        stub.GetModelStatus(sreq, timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    # Restore the original set for the other tests.
    req3 = model_management_pb2.ReloadConfigRequest()
    for name in ("mobilenet", "detector", "half_plus_two"):
        c = req3.config.model_config_list.config.add()
        c.name = name
        c.base_path = str(server.repo / name)
    assert stub.HandleReloadConfigRequest(req3, timeout=60).status.error_code == 0


def test_reload_config_reports_models_that_did_not_become_available(server, tmp_path):
    # TF Serving's ServerCore waits for the new models of a reload and answers UNKNOWN
    # "N model(s) did not become available: {...}" naming each one; the other models stay served.
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel)
    broken = tmp_path / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "model.onnx").write_bytes(b"this is not an onnx model")
    req = model_management_pb2.ReloadConfigRequest()
    for name, base in (
        ("mobilenet", server.repo / "mobilenet"),
        ("detector", server.repo / "detector"),
        ("half_plus_two", server.repo / "half_plus_two"),
        ("broken", tmp_path / "broken"),
        ("missing", tmp_path / "missing"),
    ):
        c = req.config.model_config_list.config.add()
        c.name = name
        c.base_path = str(base)
    with pytest.raises(grpc.RpcError) as err:
        stub.HandleReloadConfigRequest(req, timeout=60)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    details = err.value.details()
    assert details.startswith("2 model(s) did not become available: {"), details
    assert "{name: broken version: 1} due to error:" in details
    assert "{name: missing} due to error: No versions of servable missing found under base path" in details

    preq = predict_pb2.PredictRequest()
    preq.model_spec.name = "half_plus_two"
    preq.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0], np.float32)))
    assert tf.make_ndarray(predict(server, preq).outputs["y"]).tolist() == [2.5]

    # Restore the original set for the other tests.
    req2 = model_management_pb2.ReloadConfigRequest()
    for name in ("mobilenet", "detector", "half_plus_two"):
        c = req2.config.model_config_list.config.add()
        c.name = name
        c.base_path = str(server.repo / name)
    assert stub.HandleReloadConfigRequest(req2, timeout=60).status.error_code == 0
