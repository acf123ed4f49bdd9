"""The stock tritonclient.http (2.73.0) against visionserve's KServe v2 API, unchanged.

Expectations follow Triton's behaviour (status codes, JSON shapes, classification format),
since that is what the client and tools such as perf_analyzer are written against.
"""
import re

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import MODELS

CLS_RE = re.compile(r"^-?\d+\.\d{6}:\d+(:.+)?$")  # "%f" value, index, optional label


def half_plus_two(c, x, binary_in=True, binary_out=True, **kw):
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary_in)
    out = httpclient.InferRequestedOutput("y", binary_data=binary_out)
    return c.infer("half_plus_two", [inp], outputs=[out], **kw)


def status_of(exc_info):
    return exc_info.value.status()


# ------------------------------------------------------------------ health and metadata


def test_server_live_ready_and_metadata(http):
    assert http.is_server_live() is True
    assert http.is_server_ready() is True
    md = http.get_server_metadata()
    assert md["name"] == "visionserve" and isinstance(md["version"], str)
    for ext in ("binary_tensor_data", "classification", "model_repository", "model_configuration", "statistics"):
        assert ext in md["extensions"], ext


def test_model_ready(http):
    assert http.is_model_ready("mobilenet") is True
    assert http.is_model_ready("mobilenet", "1") is True
    assert http.is_model_ready("mobilenet", "99") is False
    assert http.is_model_ready("no_such_model") is False


def test_model_metadata(http):
    md = http.get_model_metadata("mobilenet")
    assert md["name"] == "mobilenet"
    assert md["versions"] == ["1"]
    assert md["platform"] == "onnxruntime_onnx"
    assert md["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 3, 224, 224]}]
    assert md["outputs"] == [{"name": "output", "datatype": "FP32", "shape": [-1, 1000]}]
    assert http.get_model_metadata("mobilenet", "1")["versions"] == ["1"]


def test_model_config(http):
    cfg = http.get_model_config("mobilenet")
    assert cfg["name"] == "mobilenet"
    assert cfg["max_batch_size"] > 0
    assert cfg["input"][0]["data_type"] == "TYPE_FP32"
    assert cfg["input"][0]["dims"] == [3, 224, 224]
    assert cfg["output"][0]["dims"] == [1000]
    assert cfg["output"][0]["label_filename"] == "imagenet_synset.txt"
    md = http.get_model_metadata("mobilenet")
    assert md["inputs"][0]["shape"] == [-1] + cfg["input"][0]["dims"]
    mnist = http.get_model_config("mnist", "1")
    assert mnist["max_batch_size"] == 0
    assert mnist["input"][0]["dims"] == [1, 1, 28, 28]
    types = {i["name"]: i["data_type"] for i in http.get_model_config("dtype_echo")["input"]}
    assert types["bytes"] == "TYPE_STRING" and types["fp16"] == "TYPE_FP16" and types["bool"] == "TYPE_BOOL"


# ------------------------------------------------------------------ inference


@pytest.mark.parametrize("binary_in", [True, False])
@pytest.mark.parametrize("binary_out", [True, False])
def test_infer_binary_and_json(http, binary_in, binary_out):
    x = np.array([1.0, 2.0, 5.0], np.float32)
    r = half_plus_two(http, x, binary_in, binary_out, request_id="req-7")
    np.testing.assert_allclose(r.as_numpy("y"), x / 2 + 2)
    resp = r.get_response()
    assert resp["model_name"] == "half_plus_two"
    assert resp["model_version"] == "1"
    assert resp["id"] == "req-7"
    out = r.get_output("y")
    assert out["datatype"] == "FP32" and out["shape"] == [3]
    if binary_out:
        assert out["parameters"]["binary_data_size"] == 12 and "data" not in out
    else:
        assert "data" in out and "binary_data_size" not in out.get("parameters", {})


def test_infer_all_outputs_binary_by_default(http):
    inp = httpclient.InferInput("x", [2], "FP32")
    inp.set_data_from_numpy(np.array([0.0, 4.0], np.float32))
    r = http.infer("half_plus_two", [inp])  # no outputs: binary_data_output=true
    assert r.get_output("y")["parameters"]["binary_data_size"] == 8
    np.testing.assert_allclose(r.as_numpy("y"), [2.0, 4.0])


def test_infer_explicit_version(http):
    r = half_plus_two(http, np.array([2.0], np.float32), model_version="1")
    assert r.get_response()["model_version"] == "1"


@pytest.mark.parametrize("req_alg", [None, "gzip", "deflate"])
@pytest.mark.parametrize("resp_alg", [None, "gzip", "deflate"])
def test_infer_compression(http, req_alg, resp_alg):
    x = np.arange(1000, dtype=np.float32)
    r = half_plus_two(http, x, request_compression_algorithm=req_alg, response_compression_algorithm=resp_alg)
    np.testing.assert_allclose(r.as_numpy("y"), x / 2 + 2)


def test_infer_mobilenet_batch_and_output_selection(http):
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
    inp = httpclient.InferInput("input", [2, 3, 224, 224], "FP32")
    inp.set_data_from_numpy(x)
    r = http.infer("mobilenet", [inp], outputs=[httpclient.InferRequestedOutput("output")])
    assert r.as_numpy("output").shape == (2, 1000)
    r = http.infer("dtype_echo", _echo_inputs(binary=True), outputs=[httpclient.InferRequestedOutput("int8_out")])
    assert [o["name"] for o in r.get_response()["outputs"]] == ["int8_out"]


ECHO = {
    "bool": ("BOOL", np.array([[True, False]])),
    "uint8": ("UINT8", np.array([[0, 255]], np.uint8)),
    "uint16": ("UINT16", np.array([[0, 65535]], np.uint16)),
    "uint32": ("UINT32", np.array([[0, 4294967295]], np.uint32)),
    "uint64": ("UINT64", np.array([[0, 2**53 - 1]], np.uint64)),
    "int8": ("INT8", np.array([[-128, 127]], np.int8)),
    "int16": ("INT16", np.array([[-32768, 32767]], np.int16)),
    "int32": ("INT32", np.array([[-(2**31), 2**31 - 1]], np.int32)),
    "int64": ("INT64", np.array([[-(2**53) + 1, 2**53 - 1]], np.int64)),
    "fp16": ("FP16", np.array([[1.0, -2.5]], np.float16)),
    "fp32": ("FP32", np.array([[0.1, -1e30]], np.float32)),
    "fp64": ("FP64", np.array([[0.1, -1e300]], np.float64)),
    "bytes": ("BYTES", np.array([[b"", "h\u00e9llo".encode()]], dtype=np.object_)),
}


def _echo_inputs(binary):
    inputs = []
    for name, (datatype, value) in ECHO.items():
        inp = httpclient.InferInput(name, list(value.shape), datatype)
        inp.set_data_from_numpy(value, binary_data=binary)
        inputs.append(inp)
    return inputs


@pytest.mark.parametrize("binary", [True, False])
def test_every_datatype_and_bytes_tensors(http, binary):
    # FP16 in JSON is a visionserve superset (Triton refuses it): the client sends and reads plain numbers.
    outputs = [httpclient.InferRequestedOutput(f"{n}_out", binary_data=binary) for n in ECHO]
    r = http.infer("dtype_echo", _echo_inputs(binary), outputs=outputs)
    for name, (datatype, value) in ECHO.items():
        out = r.as_numpy(f"{name}_out")
        assert r.get_output(f"{name}_out")["datatype"] == datatype
        if datatype == "BYTES":
            got = [v if isinstance(v, bytes) else v.encode() for v in out.reshape(-1)]
            assert got == list(value.reshape(-1)), name
        else:
            np.testing.assert_array_equal(out, value, err_msg=name)


# ----------------------------------------------------------- classification


def _mnist_input():
    x = np.zeros((1, 1, 28, 28), np.float32)
    x[0, 0, 4:24, 13:15] = 1.0  # a crude "1"
    inp = httpclient.InferInput("Input3", [1, 1, 28, 28], "FP32")
    inp.set_data_from_numpy(x)
    return inp


@pytest.mark.parametrize("binary_out", [True, False])
def test_classification_non_batching_model(http, binary_out):
    raw = http.infer("mnist", [_mnist_input()]).as_numpy("Plus214_Output_0").reshape(-1)
    r = http.infer(
        "mnist",
        [_mnist_input()],
        outputs=[httpclient.InferRequestedOutput("Plus214_Output_0", binary_data=binary_out, class_count=3)],
    )
    out = r.get_output("Plus214_Output_0")
    assert out["datatype"] == "BYTES"
    assert out["shape"] == [3]  # max_batch_size 0: the whole tensor ranked as one list
    items = [c.decode() if isinstance(c, bytes) else c for c in r.as_numpy("Plus214_Output_0").tolist()]
    assert all(CLS_RE.match(s) for s in items), items
    idx = [int(s.split(":")[1]) for s in items]
    assert idx == list(np.argsort(-raw, kind="stable")[:3])
    assert items[0].split(":")[0] == f"{raw[idx[0]]:.6f}"


def test_classification_batched_with_labels(http):
    x = np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32)
    inp = httpclient.InferInput("input", [2, 3, 224, 224], "FP32")
    inp.set_data_from_numpy(x)
    raw = http.infer("mobilenet", [inp]).as_numpy("output")
    r = http.infer("mobilenet", [inp], outputs=[httpclient.InferRequestedOutput("output", class_count=5)])
    cls = r.as_numpy("output")
    assert cls.shape == (2, 5)
    with open(MODELS / "imagenet_synset.txt") as f:
        labels = [line.rstrip("\n").split(" ", 1)[1] for line in f]
    for b in range(2):
        parts = [s.decode().split(":", 2) for s in cls[b]]
        assert int(parts[0][1]) == int(np.argmax(raw[b]))
        for value, index, label in parts:
            assert label == labels[int(index)]
            assert abs(float(value) - raw[b][int(index)]) < 1e-5


# ------------------------------------------------------------------ errors


def test_unknown_model_and_version_are_404(http):
    with pytest.raises(InferenceServerException) as e:
        http.get_model_metadata("no_such_model")
    assert status_of(e) == "404"
    assert e.value.message()
    with pytest.raises(InferenceServerException) as e:
        http.get_model_config("mobilenet", "99")
    assert status_of(e) == "404"
    with pytest.raises(InferenceServerException) as e:
        half_plus_two(http, np.array([1.0], np.float32), model_version="7")
    assert status_of(e) == "404"


@pytest.mark.parametrize("name,shape,dtype", [("wrong_name", [2], "FP32"), ("x", [2, 2], "FP32"), ("x", [2], "INT32")])
def test_bad_infer_request_is_400(http, name, shape, dtype):
    inp = httpclient.InferInput(name, shape, dtype)
    inp.set_data_from_numpy(np.zeros(shape, np.float32 if dtype == "FP32" else np.int32))
    with pytest.raises(InferenceServerException) as e:
        http.infer("half_plus_two", [inp])
    assert status_of(e) == "400"
    assert e.value.message()


def test_unknown_output_and_unsupported_classification_are_400(http):
    inp = httpclient.InferInput("x", [1], "FP32")
    inp.set_data_from_numpy(np.ones([1], np.float32))
    with pytest.raises(InferenceServerException) as e:
        http.infer("half_plus_two", [inp], outputs=[httpclient.InferRequestedOutput("nope")])
    assert status_of(e) == "400"
    with pytest.raises(InferenceServerException) as e:
        http.infer("dtype_echo", _echo_inputs(True), outputs=[httpclient.InferRequestedOutput("fp16_out", class_count=1)])
    assert status_of(e) == "400" and "unsupported type" in e.value.message()


# -------------------------------------------------------- model repository


def test_repository_index(http):
    index = http.get_model_repository_index()  # POST with an empty body
    by_name = {m["name"]: m for m in index}
    assert by_name["mobilenet"] == {"name": "mobilenet", "version": "1", "state": "READY"}
    # In the model root, not loaded: just its name (or "unloaded" once another test loaded it).
    assert by_name["spare"] in ({"name": "spare"}, {"name": "spare", "state": "UNAVAILABLE", "reason": "unloaded"})


def test_unload_then_load(http):
    http.unload_model("half_plus_two")  # body {"parameters":{"unload_dependents":false}}
    try:
        assert http.is_model_ready("half_plus_two") is False
        states = {m["name"]: m.get("state") for m in http.get_model_repository_index()}
        assert states["half_plus_two"] == "UNAVAILABLE"
        with pytest.raises(InferenceServerException) as e:
            half_plus_two(http, np.array([1.0], np.float32))
        assert status_of(e) == "404"
    finally:
        http.load_model("half_plus_two")  # body {}
    assert http.is_model_ready("half_plus_two") is True
    np.testing.assert_allclose(half_plus_two(http, np.array([2.0], np.float32)).as_numpy("y"), [3.0])


def test_load_from_model_root_by_name(http):
    http.load_model("spare")
    try:
        assert http.is_model_ready("spare", "1")
        inp = httpclient.InferInput("x", [1], "FP32")
        inp.set_data_from_numpy(np.array([4.0], np.float32))
        np.testing.assert_allclose(http.infer("spare", [inp]).as_numpy("y"), [4.0])
    finally:
        http.unload_model("spare")
    assert http.is_model_ready("spare") is False


def test_load_errors(http):
    with pytest.raises(InferenceServerException) as e:
        http.load_model("not_in_any_root")
    assert status_of(e) == "404"
    # Uploading a config or model files is refused: models only load from the model roots.
    with pytest.raises(InferenceServerException) as e:
        http.load_model("uploaded", config='{"backend":"onnxruntime"}', files={"file:1/model.onnx": b"\x08\x07"})
    assert status_of(e) == "501"


# -------------------------------------------------------------- statistics


def test_statistics(http):
    def stat():
        s = http.get_inference_statistics("half_plus_two")
        (m,) = [m for m in s["model_stats"] if m["version"] == "1"]
        return m

    before = stat()
    for _ in range(3):
        half_plus_two(http, np.array([1.0, 2.0], np.float32))
    after = stat()
    assert after["name"] == "half_plus_two"
    for k in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"):
        assert set(after["inference_stats"][k]) == {"count", "ns"}  # all read by perf_analyzer
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 3
    assert after["inference_stats"]["queue"]["count"] - before["inference_stats"]["queue"]["count"] == 3
    assert after["inference_count"] >= before["inference_count"] + 3
    assert after["execution_count"] >= before["execution_count"] + 3
    assert after["last_inference"] > 0
    assert http.get_inference_statistics("half_plus_two", "1")["model_stats"][0]["version"] == "1"
    names = {m["name"] for m in http.get_inference_statistics()["model_stats"]}
    assert {"half_plus_two", "mobilenet", "mnist", "dtype_echo"} <= names
