"""TensorFlow SavedModels served by visionserve, called by the official tensorflow-serving-api
stubs (and curl) with the SavedModels' own signature names and keys. Every answer is compared
with TensorFlow running the same SavedModel in this process."""
import base64
import json
import subprocess

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from test_rest_curl import curl

_loaded = {}


def tf_model(path):
    """TensorFlow's own load of a SavedModel (cached)."""
    if str(path) not in _loaded:
        _loaded[str(path)] = tf.saved_model.load(str(path))
    return _loaded[str(path)]


def signature_defs(path):
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((path / "saved_model.pb").read_bytes())
    return {k: v for k, v in saved.meta_graphs[0].signature_def.items() if not k.startswith("__")}


def stub(server):
    return prediction_service_pb2_grpc.PredictionServiceStub(server.channel)


def example(**features):
    f = {}
    for key, value in features.items():
        if isinstance(value, bytes):
            f[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        else:
            f[key] = tf.train.Feature(float_list=tf.train.FloatList(value=list(np.atleast_1d(value))))
    return tf.train.Example(features=tf.train.Features(feature=f))


def images(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((n, 32, 32, 3)) * 255).astype(np.uint8)


def test_metadata_keeps_signature_names_keys_dtypes_and_methods(tf_server, savedmodels):
    for name in ("half_plus_two", "cnn"):
        req = get_model_metadata_pb2.GetModelMetadataRequest()
        req.model_spec.name = name
        req.metadata_field.append("signature_def")
        resp = stub(tf_server).GetModelMetadata(req, timeout=30)
        served = get_model_metadata_pb2.SignatureDefMap()
        resp.metadata["signature_def"].Unpack(served)
        want = signature_defs(savedmodels[name])
        assert sorted(served.signature_def) == sorted(want)
        for key, sig in want.items():
            got = served.signature_def[key]
            assert got.method_name == sig.method_name, key
            for side in ("inputs", "outputs"):
                assert sorted(getattr(got, side)) == sorted(getattr(sig, side)), (key, side)
                for alias, info in getattr(sig, side).items():
                    mine = getattr(got, side)[alias]
                    assert mine.dtype == info.dtype, (key, alias)
                    assert mine.tensor_shape.unknown_rank == info.tensor_shape.unknown_rank, (key, alias)
                    assert [d.size for d in mine.tensor_shape.dim] == [d.size for d in info.tensor_shape.dim]


def test_half_plus_two_predict_with_original_keys(tf_server, savedmodels):
    x = np.array([[1.0], [2.0], [5.0], [-3.25]], np.float32)
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "half_plus_two"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    resp = stub(tf_server).Predict(req, timeout=30)
    served = tf.make_ndarray(resp.outputs["y"])
    expected = tf_model(savedmodels["half_plus_two"]).signatures["predict_unknown_rank"](x=tf.constant(x))["y"]
    np.testing.assert_allclose(served, expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(served, 0.5 * x + 2, atol=1e-6)
    # The unknown-rank signature takes any rank.
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "half_plus_two"
    req.model_spec.signature_name = "predict_unknown_rank"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.arange(24, dtype=np.float32).reshape(2, 3, 4)))
    out = tf.make_ndarray(stub(tf_server).Predict(req, timeout=30).outputs["y"])
    np.testing.assert_allclose(out, 0.5 * np.arange(24).reshape(2, 3, 4) + 2)


def test_cnn_predict_matches_tensorflow(tf_server, savedmodels):
    x = images(4).astype(np.float32) / 255.0
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "cnn"
    req.inputs["images"].CopyFrom(tf.make_tensor_proto(x))
    resp = stub(tf_server).Predict(req, timeout=30)
    ref = tf_model(savedmodels["cnn"]).signatures["serving_default"](images=tf.constant(x))
    np.testing.assert_allclose(tf.make_ndarray(resp.outputs["probabilities"]), ref["probabilities"].numpy(), atol=1e-5)
    np.testing.assert_array_equal(tf.make_ndarray(resp.outputs["classes"]), ref["classes"].numpy())


def test_cnn_image_bytes_signature_matches_tensorflow(tf_server, savedmodels):
    pngs = [tf.io.encode_png(img).numpy() for img in images(3, seed=1)]
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "cnn"
    req.model_spec.signature_name = "serving_bytes"
    req.inputs["image_bytes"].CopyFrom(tf.make_tensor_proto(pngs))
    assert req.inputs["image_bytes"].string_val
    resp = stub(tf_server).Predict(req, timeout=30)
    assert resp.model_spec.signature_name == "serving_bytes"
    ref = tf_model(savedmodels["cnn"]).signatures["serving_bytes"](image_bytes=tf.constant(pngs))
    np.testing.assert_allclose(tf.make_ndarray(resp.outputs["probabilities"]), ref["probabilities"].numpy(), atol=1e-5)
    # JPEG: TensorFlow's and libvips' decoders may differ by a grey level here and there.
    jpegs = [tf.io.encode_jpeg(img, quality=95).numpy() for img in images(2, seed=2)]
    req.inputs["image_bytes"].CopyFrom(tf.make_tensor_proto(jpegs))
    resp = stub(tf_server).Predict(req, timeout=30)
    ref = tf_model(savedmodels["cnn"]).signatures["serving_bytes"](image_bytes=tf.constant(jpegs))
    np.testing.assert_allclose(tf.make_ndarray(resp.outputs["probabilities"]), ref["probabilities"].numpy(), atol=0.02)


def test_cnn_image_bytes_over_rest_b64(tf_server, savedmodels):
    png = tf.io.encode_png(images(1, seed=3)[0]).numpy()
    body = json.dumps({"signature_name": "serving_bytes", "instances": [{"b64": base64.b64encode(png).decode()}]})
    code, out = curl("-d", body, f"{tf_server.rest}/v1/models/cnn:predict")
    assert code == 200, out
    served = json.loads(out)["predictions"][0]
    ref = tf_model(savedmodels["cnn"]).signatures["serving_bytes"](image_bytes=tf.constant([png]))
    np.testing.assert_allclose(served["probabilities"], ref["probabilities"].numpy()[0], atol=1e-5)
    assert served["classes"] == int(ref["classes"].numpy()[0])


def serialized(examples):
    return tf.constant([e.SerializeToString() for e in examples])


def test_classify_regress_multiinference_with_tf_examples(tf_server, savedmodels):
    model = tf_model(savedmodels["half_plus_two"])
    xs = [1.0, -2.0, 5.5]
    examples = [example(x=v) for v in xs]

    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = "half_plus_two"
    req.model_spec.signature_name = "classify_full"
    req.input.example_list.examples.extend(examples)
    resp = stub(tf_server).Classify(req, timeout=30)
    ref = model.signatures["classify_full"](inputs=serialized(examples))
    assert resp.model_spec.signature_name == "classify_full"
    assert resp.model_spec.version.value == 1
    for i, classes in enumerate(resp.result.classifications):
        assert [c.label for c in classes.classes] == [b.decode() for b in ref["classes"].numpy()[i]]
        np.testing.assert_allclose([c.score for c in classes.classes], ref["scores"].numpy()[i], atol=1e-6)

    req.model_spec.signature_name = "classify_x_to_y"
    resp = stub(tf_server).Classify(req, timeout=30)
    ref = model.signatures["classify_x_to_y"](inputs=serialized(examples))["scores"].numpy()
    assert [[c.label for c in cs.classes] for cs in resp.result.classifications] == [[""]] * 3
    np.testing.assert_allclose([cs.classes[0].score for cs in resp.result.classifications], ref[:, 0], atol=1e-6)

    rreq = regression_pb2.RegressionRequest()
    rreq.model_spec.name = "half_plus_two"
    rreq.model_spec.signature_name = "regress_x_to_y"
    # With a context: the examples' own features win over it.
    rreq.input.example_list_with_context.context.CopyFrom(example(x=100.0))
    rreq.input.example_list_with_context.examples.extend([example(x=3.0), tf.train.Example()])
    rresp = stub(tf_server).Regress(rreq, timeout=30)
    np.testing.assert_allclose([r.value for r in rresp.result.regressions], [3.5, 52.0])

    mreq = inference_pb2.MultiInferenceRequest()
    for signature, method in (("classify_full", "tensorflow/serving/classify"), ("regress_x_to_y", "tensorflow/serving/regress")):
        task = mreq.tasks.add()
        task.model_spec.name = "half_plus_two"
        task.model_spec.signature_name = signature
        task.method_name = method
    mreq.input.example_list.examples.extend(examples)
    mresp = stub(tf_server).MultiInference(mreq, timeout=30)
    assert [r.model_spec.signature_name for r in mresp.results] == ["classify_full", "regress_x_to_y"]
    ref = model.signatures["regress_x_to_y"](inputs=serialized(examples))["outputs"].numpy()[:, 0]
    np.testing.assert_allclose([r.value for r in mresp.results[1].regression_result.regressions], ref, atol=1e-6)
    assert len(mresp.results[0].classification_result.classifications) == 3


def test_tf_example_errors_match_tensorflow(tf_server, savedmodels):
    model = tf_model(savedmodels["half_plus_two"])
    missing = example(y=1.0)
    with pytest.raises(tf.errors.InvalidArgumentError) as tf_error:
        model.signatures["regress_x_to_y"](inputs=serialized([missing]))
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = "half_plus_two"
    req.model_spec.signature_name = "regress_x_to_y"
    req.input.example_list.examples.append(missing)
    with pytest.raises(grpc.RpcError) as err:
        stub(tf_server).Regress(req, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # TensorFlow: InvalidArgumentError
    assert err.value.details() in tf_error.value.message
    # Predict on the same signature with serialized examples goes through the same parser.
    preq = predict_pb2.PredictRequest()
    preq.model_spec.name = "half_plus_two"
    preq.model_spec.signature_name = "regress_x_to_y"
    preq.inputs["inputs"].CopyFrom(tf.make_tensor_proto([missing.SerializeToString()]))
    with pytest.raises(grpc.RpcError) as err:
        stub(tf_server).Predict(preq, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() in tf_error.value.message
    # An empty input and a missing signature, as TF Serving answers them.
    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = "half_plus_two"
    req.model_spec.signature_name = "classify_full"
    with pytest.raises(grpc.RpcError) as err:
        stub(tf_server).Classify(req, timeout=30)
    assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, "Input is empty.")
    req.model_spec.signature_name = "nope"
    req.input.example_list.examples.append(example(x=1.0))
    with pytest.raises(grpc.RpcError) as err:
        stub(tf_server).Classify(req, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "No signature was found with the name: nope"


def test_rest_classify_and_regress(tf_server, savedmodels):
    model = tf_model(savedmodels["half_plus_two"])
    code, out = curl(
        "-d",
        json.dumps({"signature_name": "classify_full", "examples": [{"x": 1.0}, {"x": [-2.0]}]}),
        f"{tf_server.rest}/v1/models/half_plus_two:classify",
    )
    assert code == 200, out
    ref = model.signatures["classify_full"](inputs=serialized([example(x=1.0), example(x=-2.0)]))
    results = json.loads(out)["results"]
    for i, row in enumerate(results):
        assert [label for label, _ in row] == ["neg", "pos"]
        np.testing.assert_allclose([score for _, score in row], ref["scores"].numpy()[i], atol=1e-6)
    code, out = curl(
        "-d",
        json.dumps({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}, {"x": 3.0}]}),
        f"{tf_server.rest}/v1/models/half_plus_two:regress",
    )
    assert (code, json.loads(out)) == (200, {"results": [2.5, 3.5]})
    code, out = curl(
        "-d",
        json.dumps({"signature_name": "regress_x_to_y", "examples": [{"y": 1.0}]}),
        f"{tf_server.rest}/v1/models/half_plus_two:regress",
    )
    assert code == 400
    assert json.loads(out)["error"] == "Name: <unknown>, Feature: x (data type: float) is required but could not be found."


def test_unsupported_ops_are_named_in_the_model_status(tf_server, savedmodels):
    # serving_bytes decodes images in the graph and has no image config here: it is left out,
    # serving_default serves (a partial load, as TF Serving serves every signature it can).
    req = get_model_status_pb2.GetModelStatusRequest()
    req.model_spec.name = "cnn_no_config"
    resp = model_service_pb2_grpc.ModelServiceStub(tf_server.channel).GetModelStatus(req, timeout=30)
    status = resp.model_version_status[0]
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert status.status.error_code == grpc.StatusCode.OK.value[0]
    # decode_image in the graph becomes DecodeImage / DecodeJpeg / DecodePng ops: all named.
    assert '"serving_bytes" uses TensorFlow ops with no ONNX equivalent' in status.status.error_message
    assert "Decode" in status.status.error_message
    x = images(2).astype(np.float32) / 255.0
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "cnn_no_config"
    req.inputs["images"].CopyFrom(tf.make_tensor_proto(x))
    resp = stub(tf_server).Predict(req, timeout=30)
    ref = tf_model(savedmodels["cnn"]).signatures["serving_default"](images=tf.constant(x))
    np.testing.assert_allclose(tf.make_ndarray(resp.outputs["probabilities"]), ref["probabilities"].numpy(), atol=1e-5)


def test_fp16_over_grpc_half_val_and_rest_json(tf_server):
    x = np.array([1.0, 2.0, 5.0, -0.3], np.float16)
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "fp16"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    assert req.inputs["x"].half_val or req.inputs["x"].tensor_content
    req2 = predict_pb2.PredictRequest()
    req2.model_spec.name = "fp16"
    t = req2.inputs["x"]
    t.dtype = tf.float16.as_datatype_enum
    t.tensor_shape.dim.add(size=4)
    t.half_val.extend(x.view(np.uint16).tolist())
    for r in (req, req2):
        resp = stub(tf_server).Predict(r, timeout=30)
        assert resp.outputs["y"].dtype == tf.float16.as_datatype_enum
        y = tf.make_ndarray(resp.outputs["y"])
        assert y.dtype == np.float16
        np.testing.assert_array_equal(y, (x.astype(np.float32) * 0.5 + 2).astype(np.float16))
    code, out = curl("-d", '{"instances": [1.0, 2.0, 5.0]}', f"{tf_server.rest}/v1/models/fp16:predict")
    assert (code, json.loads(out)) == (200, {"predictions": [2.5, 3, 4.5]})
