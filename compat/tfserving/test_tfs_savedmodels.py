"""TF Serving-shaped SavedModels (tfs_savedmodels.py: half_plus_two TF1 with TF Serving's five
signatures, its TF2 variant, half_plus_three, an estimator-style export) served by visionserve
and called through the official tensorflow-serving-api stubs and REST. The tf.Examples are
parsed by the server (the graphs are cut after their parse op); every answer is compared with
TensorFlow running the same SavedModel in this process."""
import base64
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import struct_pb2
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

from conftest import CACHE, Server
from tfs_savedmodels import VERSION
from test_rest_curl import curl

CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
MODELS = ("half_plus_two", "half_plus_two_tf2", "half_plus_three", "estimator")


@pytest.fixture(scope="module")
def models():
    from tfs_savedmodels import tfs_saved_models

    return tfs_saved_models(CACHE / "tfs-savedmodels")


@pytest.fixture(scope="module")
def tfs(models):
    repo = Path(tempfile.mkdtemp(prefix="vs-compat-tfs-"))
    config = repo / "models.config"
    entries = "\n".join(
        f"  config {{ name: '{name}' base_path: '{models[name]}' model_platform: 'tensorflow' }}"
        for name in (*MODELS, "nothing_servable")
    )
    config.write_text(f"model_config_list {{\n{entries}\n}}\n")
    started = time.time()
    s = Server(
        repo,
        config,
        extra_args=[
            f"--saved_model_converter_python={sys.executable}",
            f"--saved_model_cache_dir={CACHE / 'conversions'}",
            # nothing_servable fails to load on purpose: start anyway.
            "--wait_for_models=true",
        ],
        ready_timeout=600,
    )
    print(f"\n5 TF Serving-shaped SavedModels loaded in {time.time() - started:.1f} s")
    yield s
    s.stop()
    shutil.rmtree(repo, ignore_errors=True)


_loaded = {}


def tf_signature(models, name, signature):
    key = str(models[name])
    if key not in _loaded:
        _loaded[key] = tf.saved_model.load(str(models[name] / VERSION))
    return _loaded[key].signatures[signature]


def stub(server):
    return prediction_service_pb2_grpc.PredictionServiceStub(server.channel)


def example(**features):
    f = {}
    for key, value in features.items():
        values = list(np.atleast_1d(value))
        if isinstance(values[0], (int, np.integer)) and not isinstance(values[0], bool):
            f[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        else:
            f[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Example(features=tf.train.Features(feature=f))


def serialized(examples):
    return [e.SerializeToString() for e in examples]


def assert_same(served, expected, what):
    expected = np.asarray(expected)
    if expected.dtype.kind in "SO":
        assert served.tolist() == expected.tolist(), what
    else:
        assert served.shape == expected.shape, (what, served.shape, expected.shape)
        np.testing.assert_allclose(served, expected, atol=1e-6, err_msg=what)


def predict(server, model, signature, inputs):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature
    for key, value in inputs.items():
        req.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    resp = stub(server).Predict(req, timeout=30)
    assert resp.model_spec.version.value == 123
    return {k: tf.make_ndarray(v) for k, v in resp.outputs.items()}


def check_predict(server, models, model, signature, inputs):
    served = predict(server, model, signature, inputs)
    ref = tf_signature(models, model, signature)(**{k: tf.constant(v) for k, v in inputs.items()})
    assert sorted(served) == sorted(ref)
    for key, value in ref.items():
        assert_same(served[key], value.numpy(), f"{model}/{signature}/{key}")


def check_classify(server, models, model, signature, examples):
    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature
    req.input.example_list.examples.extend(examples)
    resp = stub(server).Classify(req, timeout=30)
    assert (resp.model_spec.signature_name, resp.model_spec.version.value) == (signature, 123)
    ref = tf_signature(models, model, signature)(inputs=tf.constant(serialized(examples)))
    scores = ref["scores"].numpy()
    for i, classes in enumerate(resp.result.classifications):
        np.testing.assert_allclose([c.score for c in classes.classes], scores[i], atol=1e-6)
        if "classes" in ref:
            assert [c.label for c in classes.classes] == [b.decode() for b in ref["classes"].numpy()[i]]
    assert len(resp.result.classifications) == len(examples)


def regress(server, model, signature, examples):
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature
    req.input.example_list.examples.extend(examples)
    resp = stub(server).Regress(req, timeout=30)
    assert (resp.model_spec.signature_name, resp.model_spec.version.value) == (signature, 123)
    return [r.value for r in resp.result.regressions]


def check_regress(server, models, model, signature, examples):
    ref = tf_signature(models, model, signature)(inputs=tf.constant(serialized(examples)))["outputs"].numpy()
    np.testing.assert_allclose(regress(server, model, signature, examples), ref.reshape(-1), atol=1e-6)


def check_multi_inference(server, models, model, tasks, examples):
    req = inference_pb2.MultiInferenceRequest()
    for signature, method in tasks:
        task = req.tasks.add()
        task.model_spec.name = model
        task.model_spec.signature_name = signature
        task.method_name = method
    req.input.example_list.examples.extend(examples)
    resp = stub(server).MultiInference(req, timeout=30)
    assert [r.model_spec.signature_name for r in resp.results] == [s for s, _ in tasks]
    for (signature, method), result in zip(tasks, resp.results):
        ref = tf_signature(models, model, signature)(inputs=tf.constant(serialized(examples)))
        if method == REGRESS:
            got = [r.value for r in result.regression_result.regressions]
            np.testing.assert_allclose(got, ref["outputs"].numpy().reshape(-1), atol=1e-6)
        else:
            got = [[c.score for c in cs.classes] for cs in result.classification_result.classifications]
            np.testing.assert_allclose(got, ref["scores"].numpy(), atol=1e-6)


XS = [1.0, -2.0, 5.5, 0.25]


def test_every_signature_is_served_with_its_declaration(tfs, models):
    for model in MODELS:
        req = get_model_metadata_pb2.GetModelMetadataRequest()
        req.model_spec.name = model
        req.metadata_field.append("signature_def")
        resp = stub(tfs).GetModelMetadata(req, timeout=30)
        served = get_model_metadata_pb2.SignatureDefMap()
        resp.metadata["signature_def"].Unpack(served)
        loaded = tf.saved_model.load(str(models[model] / VERSION))
        want = set(loaded.signatures) - ({"regress_sparse"} if model == "half_plus_three" else set())
        assert set(served.signature_def) == want, model
        assert ("unserved_signatures" in resp.metadata) == (model == "half_plus_three"), model


def test_half_plus_two_five_signatures_predict(tfs, models):
    examples = [example(x=v, x2=v * 3) for v in XS[:3]] + [example(x=7.0)]  # x2 defaults to 0
    check_predict(tfs, models, "half_plus_two", "serving_default", {"x": np.array([[v] for v in XS], np.float32)})
    check_predict(tfs, models, "half_plus_two", "regress_x2_to_y3", {"inputs": np.array([[2.0], [-4.0]], np.float32)})
    for signature in ("regress_x_to_y", "regress_x_to_y2", "classify_x_to_y"):
        check_predict(tfs, models, "half_plus_two", signature, {"inputs": np.array(serialized(examples))})


def test_half_plus_two_classify_regress_multi_inference(tfs, models):
    examples = [example(x=v) for v in XS]
    check_classify(tfs, models, "half_plus_two", "classify_x_to_y", examples)
    check_regress(tfs, models, "half_plus_two", "regress_x_to_y", examples)
    check_regress(tfs, models, "half_plus_two", "regress_x_to_y2", examples)
    check_multi_inference(
        tfs, models, "half_plus_two",
        [("classify_x_to_y", CLASSIFY), ("regress_x_to_y", REGRESS), ("regress_x_to_y2", REGRESS)], examples,
    )
    # regress_x2_to_y3 takes the float x2, not serialized examples: TF Serving feeds the examples
    # to it and TensorFlow refuses the string tensor (INVALID_ARGUMENT); so do we.
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)):
        tf_signature(models, "half_plus_two", "regress_x2_to_y3")(inputs=tf.constant(serialized(examples)))
    with pytest.raises(grpc.RpcError) as err:
        regress(tfs, "half_plus_two", "regress_x2_to_y3", [example(x2=1.0)])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_half_plus_two_missing_required_feature_is_invalid_argument_as_in_tensorflow(tfs, models):
    with pytest.raises(tf.errors.InvalidArgumentError) as tf_error:
        tf_signature(models, "half_plus_two", "regress_x_to_y2")(inputs=tf.constant(serialized([example(x2=1.0)])))
    with pytest.raises(grpc.RpcError) as err:
        regress(tfs, "half_plus_two", "regress_x_to_y2", [example(x2=1.0)])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() in tf_error.value.message


def test_half_plus_two_tf2_parse_example_v2_signatures(tfs, models):
    examples = [example(x=v) for v in XS]
    check_predict(tfs, models, "half_plus_two_tf2", "serving_default", {"x": np.array([[v] for v in XS], np.float32)})
    for signature in ("classify_x_to_y", "regress_x_to_y", "regress_x_to_y2"):
        check_predict(tfs, models, "half_plus_two_tf2", signature, {"inputs": np.array(serialized(examples))})
    check_classify(tfs, models, "half_plus_two_tf2", "classify_x_to_y", examples)
    check_regress(tfs, models, "half_plus_two_tf2", "regress_x_to_y", examples)
    check_regress(tfs, models, "half_plus_two_tf2", "regress_x_to_y2", examples)
    check_multi_inference(
        tfs, models, "half_plus_two_tf2", [("classify_x_to_y", CLASSIFY), ("regress_x_to_y2", REGRESS)], examples
    )


def test_half_plus_three_parse_example_v1_and_single_example(tfs, models):
    examples = [example(x=v) for v in XS]
    check_predict(tfs, models, "half_plus_three", "serving_default", {"x": np.array([[v] for v in XS], np.float32)})
    check_predict(tfs, models, "half_plus_three", "regress_x_to_y", {"inputs": np.array(serialized(examples))})
    check_classify(tfs, models, "half_plus_three", "classify_x_to_y", examples)
    check_regress(tfs, models, "half_plus_three", "regress_x_to_y", examples)
    check_multi_inference(
        tfs, models, "half_plus_three", [("classify_x_to_y", CLASSIFY), ("regress_x_to_y", REGRESS)], examples
    )
    # ParseSingleExample: one scalar serialized example.
    check_predict(tfs, models, "half_plus_three", "regress_single", {"inputs": np.array(serialized(examples[:1])[0])})


def test_estimator_export_classify_regress_predict(tfs, models):
    examples = [
        example(age=30.0, pos=[1.0, 2.0], n=1),
        example(age=61.5),  # pos and n take their defaults
        example(age=-4.0, pos=[-3.0, 0.5], n=7),
    ]
    for signature in ("serving_default", "classification"):
        check_classify(tfs, models, "estimator", signature, examples)
    check_regress(tfs, models, "estimator", "regression", examples)
    check_predict(tfs, models, "estimator", "predict", {"examples": np.array(serialized(examples))})
    check_multi_inference(
        tfs, models, "estimator", [("classification", CLASSIFY), ("regression", REGRESS)], examples
    )


def test_rest_classify_regress_and_predict_with_b64_examples(tfs, models):
    code, out = curl(
        "-d", json.dumps({"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": [-2.0]}]}),
        f"{tfs.rest}/v1/models/half_plus_two:classify",
    )
    assert code == 200, out
    ref = tf_signature(models, "half_plus_two", "classify_x_to_y")(
        inputs=tf.constant(serialized([example(x=1.0), example(x=-2.0)])))["scores"].numpy()
    np.testing.assert_allclose([row[0][1] for row in json.loads(out)["results"]], ref[:, 0], atol=1e-6)
    for model, signature in (("half_plus_two", "regress_x_to_y2"), ("half_plus_two_tf2", "regress_x_to_y")):
        code, out = curl(
            "-d", json.dumps({"signature_name": signature, "examples": [{"x": 1.0}, {"x": 3.0}]}),
            f"{tfs.rest}/v1/models/{model}:regress",
        )
        assert code == 200, out
        ref = tf_signature(models, model, signature)(
            inputs=tf.constant(serialized([example(x=1.0), example(x=3.0)])))["outputs"].numpy()
        np.testing.assert_allclose(json.loads(out)["results"], ref.reshape(-1), atol=1e-6)
    blobs = serialized([example(age=30.0, n=2), example(age=12.0, pos=[0.5, 0.5])])
    body = {"signature_name": "predict", "instances": [{"b64": base64.b64encode(b).decode()} for b in blobs]}
    code, out = curl("-d", json.dumps(body), f"{tfs.rest}/v1/models/estimator:predict")
    assert code == 200, out
    ref = tf_signature(models, "estimator", "predict")(examples=tf.constant(blobs))
    for i, row in enumerate(json.loads(out)["predictions"]):
        np.testing.assert_allclose(row["probabilities"], ref["probabilities"].numpy()[i], atol=1e-6)
        assert row["classes"] == [c.decode() for c in ref["classes"].numpy()[i]]


def test_partial_load_serves_the_rest_and_names_what_is_left_out(tfs, models):
    req = get_model_status_pb2.GetModelStatusRequest()
    req.model_spec.name = "half_plus_three"
    resp = model_service_pb2_grpc.ModelServiceStub(tfs.channel).GetModelStatus(req, timeout=30)
    status = resp.model_version_status[0]
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert status.status.error_code == 0
    assert '"regress_sparse"' in status.status.error_message
    assert "sparse" in status.status.error_message.split('"regress_sparse"')[1]
    mreq = get_model_metadata_pb2.GetModelMetadataRequest()
    mreq.model_spec.name = "half_plus_three"
    mreq.metadata_field.append("signature_def")
    metadata = stub(tfs).GetModelMetadata(mreq, timeout=30).metadata
    unserved = struct_pb2.Struct()
    assert metadata["unserved_signatures"].Unpack(unserved)
    assert list(unserved.keys()) == ["regress_sparse"] and "sparse" in unserved["regress_sparse"]
    code, out = curl(f"{tfs.rest}/v1/models/half_plus_three/metadata")
    assert code == 200, out
    assert "sparse" in json.loads(out)["metadata"]["unserved_signatures"]["regress_sparse"]
    with pytest.raises(grpc.RpcError) as err:
        regress(tfs, "half_plus_three", "regress_sparse", [example(x=1.0)])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not served" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        predict(tfs, "half_plus_three", "regress_sparse", {"inputs": np.array(serialized([example(x=1.0)]))})
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert 'Serving signature key "regress_sparse" not found.' in err.value.details()
    assert "sparse" in err.value.details()
    # Models that loaded whole report a clean status.
    req.model_spec.name = "half_plus_two"
    status = model_service_pb2_grpc.ModelServiceStub(tfs.channel).GetModelStatus(req, timeout=30).model_version_status[0]
    assert (status.state, status.status.error_code, status.status.error_message) == (
        get_model_status_pb2.ModelVersionStatus.AVAILABLE, 0, "")
    assert "signature not served" in tfs.logs()


def test_a_version_with_nothing_servable_fails_naming_why(tfs):
    req = get_model_status_pb2.GetModelStatusRequest()
    req.model_spec.name = "nothing_servable"
    resp = model_service_pb2_grpc.ModelServiceStub(tfs.channel).GetModelStatus(req, timeout=30)
    status = resp.model_version_status[0]
    assert status.state == get_model_status_pb2.ModelVersionStatus.END
    assert status.status.error_code == grpc.StatusCode.UNIMPLEMENTED.value[0]
    assert status.status.error_message.startswith("SavedModel cannot be served: ")
    assert 'signature "regress_sparse" did not convert: reads sparse or ragged tf.Example features (x)' in (
        status.status.error_message)
    with pytest.raises(grpc.RpcError) as err:
        regress(tfs, "nothing_servable", "regress_sparse", [example(x=1.0)])
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
