"""visionserve started as TF Serving's own test suite starts tensorflow_model_server: single-model
flags on a TensorFlow-written SavedModel in a zero-padded version directory (<base>/00000123, as
TF Serving's testdata are), TF Serving flags that have no meaning here, the gRPC API on a Unix
domain socket through the official stubs (`unix:` addresses), ports that open only once the model
is loaded (no NOT_FOUND while it loads), Classify/Regress method checks in TF Serving's words, and
config file errors in TF Serving's words. Answers are compared with TensorFlow's own run."""
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from conftest import CACHE, CLI, free_port
from test_rest_curl import curl

# TF Serving main.cc flags that mean nothing here: accepted, warned about once, ignored.
IGNORED = [
    "--num_load_threads=2",
    "--flush_filesystem_caches=true",
    "--enable_profiler",
    "--saved_model_tags=serve",
    "--tensorflow_session_parallelism=0",
    "--grpc_max_threads=4",
    "--enable_signature_method_name_check=false",
    "--xla_cpu_compilation_enabled=false",
]


def predict_request(x):
    """half_plus_two's serving_default takes x of shape [-1, 1]."""
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "default"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array(x, np.float32).reshape(-1, 1)))
    return req


@pytest.fixture(scope="module")
def padded_server(savedmodels):
    """`serve --model_name=default --model_base_path=<base>` on <base>/00000123 (a SavedModel),
    with TF Serving's extra flags and --grpc_socket_path; readiness is the gRPC port answering."""
    repo = Path(tempfile.mkdtemp(prefix="vs-compat-tfs-"))
    base = repo / "half_plus_two"
    base.mkdir()
    (base / "00000123").symlink_to(savedmodels["half_plus_two"])
    (base / "not_a_version").mkdir()
    socket_path = repo / "grpc.sock"
    grpc_port, rest_port = free_port(), free_port()
    log = open(repo / "server.log", "w+")
    proc = subprocess.Popen(
        [
            "node", str(CLI), "serve",
            f"--port={grpc_port}", f"--rest_api_port={rest_port}", "--sagemaker_port=-1",
            "--host=127.0.0.1", "--model_name=default", f"--model_base_path={base}",
            f"--grpc_socket_path={socket_path}",
            f"--saved_model_converter_python={sys.executable}",
            f"--saved_model_cache_dir={CACHE / 'conversions'}",
            *IGNORED,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    # TF Serving's tests poll until the port answers: it must never answer NOT_FOUND meanwhile.
    seen = []
    deadline = time.time() + 600
    while True:
        assert proc.poll() is None, (repo / "server.log").read_text()
        assert time.time() < deadline, (repo / "server.log").read_text()
        try:
            resp = stub.Predict(predict_request([1.0]), timeout=5)
            break
        except grpc.RpcError as e:
            seen.append(e.code())
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                resp = None
                break
            time.sleep(0.05)
    yield {
        "proc": proc, "repo": repo, "socket": socket_path, "stub": stub, "channel": channel,
        "rest": f"http://127.0.0.1:{rest_port}", "seen": seen, "first": resp,
    }
    channel.close()
    proc.terminate()
    proc.wait(timeout=30)
    log.close()
    shutil.rmtree(repo, ignore_errors=True)


def logs(server):
    return (server["repo"] / "server.log").read_text()


def test_ports_open_only_once_the_model_is_loaded(padded_server):
    assert grpc.StatusCode.NOT_FOUND not in padded_server["seen"], padded_server["seen"]
    assert set(padded_server["seen"]) <= {grpc.StatusCode.UNAVAILABLE}
    np.testing.assert_allclose(tf.make_ndarray(padded_server["first"].outputs["y"]), [[2.5]])
    log = logs(padded_server)
    assert log.index("Servable version available") < log.index("grpc server listening")


def test_zero_padded_version_directory_is_version_123(padded_server, savedmodels):
    req = get_model_status_pb2.GetModelStatusRequest()
    req.model_spec.name = "default"
    status = model_service_pb2_grpc.ModelServiceStub(padded_server["channel"]).GetModelStatus(req, timeout=10)
    assert [(s.version, s.state) for s in status.model_version_status] == [
        (123, get_model_status_pb2.ModelVersionStatus.AVAILABLE)
    ]
    code, out = curl(
        "-d", '{"instances": [[1.0], [6.0]]}', f"{padded_server['rest']}/v1/models/default/versions/123:predict"
    )
    ref = tf.saved_model.load(str(savedmodels["half_plus_two"])).signatures["serving_default"]
    expected = ref(x=tf.constant([[1.0], [6.0]]))
    assert code == 200, out
    np.testing.assert_allclose(json.loads(out)["predictions"], list(expected.values())[0].numpy())


def test_tf_serving_flags_without_meaning_warn_once_each(padded_server):
    log = logs(padded_server)
    for flag in IGNORED:
        name = flag[2:].split("=", 1)[0]
        assert log.count(f"--{name}: a TF Serving flag with no effect here, ignored") == 1, name


def test_official_stubs_over_the_unix_socket(padded_server):
    with grpc.insecure_channel(f"unix:{padded_server['socket']}") as channel:
        resp = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            predict_request([3.0, 4.0]), timeout=10
        )
        np.testing.assert_allclose(tf.make_ndarray(resp.outputs["y"]), [[3.5], [4.0]])
        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = "default"
        status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(req, timeout=10)
        assert status.model_version_status[0].version == 123


def test_regress_and_classify_on_a_predict_signature_answer_as_tf_serving(padded_server):
    code, out = curl("-d", '{"examples": [{"x": 1.0}]}', f"{padded_server['rest']}/v1/models/default:regress")
    assert code == 400
    assert json.loads(out)["error"].startswith("No regression inputs found in SignatureDef")
    code, out = curl("-d", '{"examples": [{"x": 1.0}]}', f"{padded_server['rest']}/v1/models/default:classify")
    assert code == 400
    assert json.loads(out)["error"].startswith("No classification inputs found in SignatureDef")
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = "default"
    req.input.example_list.examples.add().features.feature["x"].float_list.value.append(1.0)
    with pytest.raises(grpc.RpcError) as err:
        padded_server["stub"].Regress(req, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("No regression inputs found in SignatureDef")
    # The regress signature itself still answers.
    req.model_spec.signature_name = "regress_x_to_y"
    assert [r.value for r in padded_server["stub"].Regress(req, timeout=10).result.regressions] == [2.5]


def test_config_file_errors_in_tf_serving_words(tmp_path):
    config = tmp_path / "models.config"
    config.write_text("model_config_list {\n  config { name 'a' }\n}\n")
    run = subprocess.run(
        ["node", str(CLI), "serve", "--port=0", "--rest_api_port=0", "--sagemaker_port=-1",
         "--host=127.0.0.1", f"--model_config_file={config}"],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode != 0
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig: 2:17: " in run.stderr, run.stderr
    assert f"Invalid protobuf file: '{config}'" in run.stderr
