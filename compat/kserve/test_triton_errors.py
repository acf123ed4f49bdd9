"""Errors in Triton's words through the stock tritonclient (HTTP and gRPC), as Triton's own client
examples test them (`ex.message().startswith("Request for unknown model")`), and the gRPC API on
the Unix domain socket of --grpc_socket_path through tritonclient.grpc's `unix:` address."""
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import Server


def half_input(client_module, name="x", datatype="FP32", values=(1.0, 2.0)):
    t = client_module.InferInput(name, [len(values)], datatype)
    t.set_data_from_numpy(np.array(values, dtype=np.float32 if datatype == "FP32" else np.int32))
    return t


@pytest.mark.parametrize("kind", ["http", "grpc"])
def test_unknown_model_and_version_in_tritons_words(kind, http, grpc):
    client = http if kind == "http" else grpc
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("wrong_model_name")
    assert e.value.message() == "Request for unknown model: 'wrong_model_name' is not found"
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("half_plus_two", "7")
    assert e.value.message() == "Request for unknown model: 'half_plus_two' version 7 is not found"
    module = httpclient if kind == "http" else grpcclient
    with pytest.raises(InferenceServerException) as e:
        client.infer("wrong_model_name", [half_input(module)])
    assert e.value.message().startswith("Request for unknown model")


@pytest.mark.parametrize("kind", ["http", "grpc"])
def test_bad_inputs_in_tritons_words(kind, http, grpc):
    client = http if kind == "http" else grpc
    module = httpclient if kind == "http" else grpcclient
    with pytest.raises(InferenceServerException) as e:
        client.infer("half_plus_two", [half_input(module, name="wrong")], request_id="r1")
    assert e.value.message() == "[request id: r1] unexpected inference input 'wrong' for model 'half_plus_two'"
    with pytest.raises(InferenceServerException) as e:
        client.infer("half_plus_two", [half_input(module, datatype="INT32")])
    assert e.value.message() == (
        "[request id: <id_unknown>] inference input 'x' data-type is 'INT32', "
        "but model 'half_plus_two' expects 'FP32'"
    )
    bad = module.InferInput("input", [1, 3, 100, 100], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 3, 100, 100), np.float32))
    with pytest.raises(InferenceServerException) as e:
        client.infer("mobilenet", [bad])
    assert e.value.message().startswith(
        "[request id: <id_unknown>] unexpected shape for input 'input' for model 'mobilenet'. "
        "Expected [-1,3,224,224], got [1,3,100,100]."
    )


@pytest.fixture(scope="module")
def socket_server():
    repo = Path(tempfile.mkdtemp(prefix="vs-kserve-unix-"))
    path = repo / "grpc.sock"
    s = Server(repo, models=("half_plus_two",), extra_args=(f"--grpc_socket_path={path}",))
    s.socket_path = path
    yield s
    s.stop()
    shutil.rmtree(repo, ignore_errors=True)


def test_grpc_on_the_unix_socket(socket_server):
    client = grpcclient.InferenceServerClient(f"unix:{socket_server.socket_path}")
    try:
        assert client.is_server_live()
        assert client.is_model_ready("half_plus_two")
        result = client.infer("half_plus_two", [half_input(grpcclient, values=(1.0, 6.0))])
        np.testing.assert_array_equal(result.as_numpy("y"), np.array([2.5, 5.0], np.float32))
    finally:
        client.close()
