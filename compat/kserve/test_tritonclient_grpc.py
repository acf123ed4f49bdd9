"""The stock tritonclient.grpc (2.73.0) against visionserve's inference.GRPCInferenceService, unchanged.

The client sends every tensor as raw_input_contents; typed `contents` are sent through the
generated stubs the package ships (tritonclient.grpc.service_pb2_grpc), as Triton's own
examples do. Expectations follow Triton's gRPC behaviour (status codes, message shapes,
classification strings). The same server also answers tritonclient.http (test_tritonclient_http.py).
"""
import re

import grpc as grpc_lib
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from PIL import Image
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from conftest import ADMIN_TOKEN, IMAGES, MODELS

CLS_RE = re.compile(r"^-?\d+\.\d{6}:\d+(:.+)?$")  # "%f" value, index, optional label
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def tabby():
    """cat_tabby.jpg as MobileNetV2 takes it: shorter side 256, centre crop 224, ImageNet mean/std, NCHW."""
    img = Image.open(IMAGES / "cat_tabby.jpg").convert("RGB")
    w, h = img.size
    scale = 256 / min(w, h)
    img = img.resize((round(w * scale), round(h * scale)), Image.BILINEAR)
    w, h = img.size
    left, top = (w - 224) // 2, (h - 224) // 2
    x = np.asarray(img.crop((left, top, left + 224, top + 224)), np.float32) / 255.0
    return np.transpose((x - MEAN) / STD, (2, 0, 1))[None].astype(np.float32)


def code_of(exc_info):
    return exc_info.value.status()


def half_plus_two(c, x, **kw):
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return c.infer("half_plus_two", [inp], **kw)


def mobilenet_infer(c, x, outputs=None, **kw):
    inp = grpcclient.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return c.infer("mobilenet", [inp], outputs=outputs, **kw)


# ------------------------------------------------------------------ health and metadata


def test_server_live_ready_and_metadata(grpc):
    assert grpc.is_server_live() is True
    assert grpc.is_server_ready() is True
    md = grpc.get_server_metadata()
    assert md.name == "visionserve" and md.version
    for ext in ("binary_tensor_data", "classification", "model_repository", "model_configuration", "statistics"):
        assert ext in md.extensions, ext
    assert grpc.get_server_metadata(as_json=True)["name"] == "visionserve"


def test_model_ready(grpc):
    assert grpc.is_model_ready("mobilenet") is True
    assert grpc.is_model_ready("mobilenet", "1") is True
    # Triton answers an unknown model with NOT_FOUND over gRPC (the HTTP client gets False).
    with pytest.raises(InferenceServerException) as e:
        grpc.is_model_ready("no_such_model")
    assert code_of(e) == "StatusCode.NOT_FOUND"


def test_model_metadata(grpc):
    md = grpc.get_model_metadata("mobilenet")
    assert md.name == "mobilenet"
    assert list(md.versions) == ["1"]
    assert md.platform == "onnxruntime_onnx"
    assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == [("input", "FP32", [-1, 3, 224, 224])]
    assert [(t.name, t.datatype, list(t.shape)) for t in md.outputs] == [("output", "FP32", [-1, 1000])]
    assert grpc.get_model_metadata("mobilenet", "1", as_json=True)["versions"] == ["1"]


def test_model_config(grpc):
    cfg = grpc.get_model_config("mobilenet").config
    assert cfg.name == "mobilenet"
    assert cfg.platform == "onnxruntime_onnx"
    assert cfg.max_batch_size > 0
    assert cfg.input[0].data_type == model_config_pb2.TYPE_FP32
    assert list(cfg.input[0].dims) == [3, 224, 224]
    assert list(cfg.output[0].dims) == [1000]
    assert cfg.output[0].label_filename == "imagenet_synset.txt"
    mnist = grpc.get_model_config("mnist", "1", as_json=True)["config"]
    assert mnist.get("max_batch_size", 0) == 0
    assert [int(d) for d in mnist["input"][0]["dims"]] == [1, 1, 28, 28]
    types = {i.name: i.data_type for i in grpc.get_model_config("dtype_echo").config.input}
    assert types["bytes"] == model_config_pb2.TYPE_STRING
    assert types["fp16"] == model_config_pb2.TYPE_FP16
    assert types["bool"] == model_config_pb2.TYPE_BOOL


# ------------------------------------------------------------------ inference


def test_mobilenet_classifies_the_tabby_over_raw_contents(grpc, server):
    x = tabby()
    r = mobilenet_infer(grpc, x, request_id="cat")
    logits = r.as_numpy("output")
    assert logits.shape == (1, 1000)
    assert int(np.argmax(logits[0])) == 281
    resp = r.get_response()
    assert resp.model_name == "mobilenet" and resp.model_version == "1" and resp.id == "cat"
    # The same tensor over tritonclient.http (binary data) runs the same model on the same CPU.
    h = httpclient.InferenceServerClient(server.url, network_timeout=60.0)
    try:
        inp = httpclient.InferInput("input", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        np.testing.assert_allclose(h.infer("mobilenet", [inp]).as_numpy("output"), logits, rtol=0, atol=1e-4)
    finally:
        h.close()


def _typed_request(model, tensors, outputs=()):
    """A ModelInferRequest with typed `contents` (no raw_input_contents)."""
    req = service_pb2.ModelInferRequest(model_name=model, id="typed")
    field = {
        "BOOL": "bool_contents",
        "INT8": "int_contents",
        "INT16": "int_contents",
        "INT32": "int_contents",
        "INT64": "int64_contents",
        "UINT8": "uint_contents",
        "UINT16": "uint_contents",
        "UINT32": "uint_contents",
        "UINT64": "uint64_contents",
        "FP32": "fp32_contents",
        "FP64": "fp64_contents",
        "BYTES": "bytes_contents",
    }
    for name, (datatype, value) in tensors.items():
        t = req.inputs.add(name=name, datatype=datatype, shape=list(value.shape))
        getattr(t.contents, field[datatype]).extend(value.reshape(-1).tolist())
    for name in outputs:
        req.outputs.add(name=name)
    return req


def test_mobilenet_classifies_the_tabby_over_typed_contents(grpc, server):
    x = tabby()
    raw = mobilenet_infer(grpc, x).as_numpy("output")
    channel = grpc_lib.insecure_channel(
        server.grpc_url, options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    )
    try:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        resp = stub.ModelInfer(_typed_request("mobilenet", {"input": ("FP32", x)}), timeout=60)
    finally:
        channel.close()
    assert resp.id == "typed"
    # tritonclient's result reader takes the response the stub returned, unchanged.
    logits = grpcclient.InferResult(resp).as_numpy("output")
    assert logits.shape == (1, 1000)
    assert int(np.argmax(logits[0])) == 281
    np.testing.assert_allclose(logits, raw, rtol=0, atol=1e-4)


ECHO = {
    "bool": ("BOOL", np.array([[True, False]])),
    "uint8": ("UINT8", np.array([[0, 255]], np.uint8)),
    "uint16": ("UINT16", np.array([[0, 65535]], np.uint16)),
    "uint32": ("UINT32", np.array([[0, 4294967295]], np.uint32)),
    "uint64": ("UINT64", np.array([[0, 2**64 - 1]], np.uint64)),
    "int8": ("INT8", np.array([[-128, 127]], np.int8)),
    "int16": ("INT16", np.array([[-32768, 32767]], np.int16)),
    "int32": ("INT32", np.array([[-(2**31), 2**31 - 1]], np.int32)),
    "int64": ("INT64", np.array([[-(2**63), 2**63 - 1]], np.int64)),
    "fp16": ("FP16", np.array([[1.0, -2.5]], np.float16)),
    "fp32": ("FP32", np.array([[0.1, -1e30]], np.float32)),
    "fp64": ("FP64", np.array([[0.1, -1e300]], np.float64)),
    "bytes": ("BYTES", np.array([[b"", "h\u00e9llo \u4e16\u754c".encode()]], dtype=np.object_)),
}


def _check_echo(result, names):
    for name in names:
        datatype, value = ECHO[name]
        out = result.as_numpy(f"{name}_out")
        assert result.get_output(f"{name}_out").datatype == datatype
        if datatype == "BYTES":
            assert list(out.reshape(-1)) == list(value.reshape(-1)), name
        else:
            np.testing.assert_array_equal(out, value, err_msg=name)


def test_every_datatype_raw(grpc):
    inputs = []
    for name, (datatype, value) in ECHO.items():
        inp = grpcclient.InferInput(name, list(value.shape), datatype)
        inp.set_data_from_numpy(value)
        inputs.append(inp)
    r = grpc.infer("dtype_echo", inputs)  # 64-bit integers beyond 2^53 come back exactly
    _check_echo(r, ECHO)
    # Output selection: only what was asked for, in that order.
    r = grpc.infer(
        "dtype_echo", inputs, outputs=[grpcclient.InferRequestedOutput(n) for n in ("int8_out", "bytes_out")]
    )
    assert [o.name for o in r.get_response().outputs] == ["int8_out", "bytes_out"]
    _check_echo(r, ("int8", "bytes"))


def test_bytes_that_are_not_text_are_refused(grpc):
    """The model's BYTES input is an ONNX string tensor, which holds text: elements that are not
    UTF-8 or hold a NUL would reach the model altered, so they are refused instead."""
    for bad in (b"a\x00b", b"\xff\xfe"):
        inputs = []
        for name, (datatype, value) in ECHO.items():
            if datatype == "BYTES":
                value = np.array([[bad, b"ok"]], dtype=np.object_)
            inp = grpcclient.InferInput(name, list(value.shape), datatype)
            inp.set_data_from_numpy(value)
            inputs.append(inp)
        with pytest.raises(InferenceServerException) as e:
            grpc.infer("dtype_echo", inputs)
        assert code_of(e) == "StatusCode.INVALID_ARGUMENT" and "not UTF-8 text" in e.value.message()


def test_typed_contents_rules(server):
    """Typed contents for every datatype but FP16 (which has no typed field); a request may not
    mix typed and raw contents (Triton refuses both with INVALID_ARGUMENT)."""
    typed = {n: v for n, v in ECHO.items() if v[0] != "FP16"}
    req = _typed_request("dtype_echo", typed)
    req.inputs.add(name="fp16", datatype="FP16", shape=[1, 2])
    req.raw_input_contents.append(ECHO["fp16"][1].tobytes())  # the one way to send FP16
    channel = grpc_lib.insecure_channel(server.grpc_url)
    try:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc_lib.RpcError) as e:
            stub.ModelInfer(req, timeout=30)
        assert e.value.code() == grpc_lib.StatusCode.INVALID_ARGUMENT
        del req.raw_input_contents[:]
        req.inputs[-1].contents.fp32_contents.extend([1.0, -2.5])  # not a field FP16 can use
        with pytest.raises(grpc_lib.RpcError) as e:
            stub.ModelInfer(req, timeout=30)
        assert e.value.code() == grpc_lib.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()


def test_request_id_and_explicit_version(grpc):
    r = half_plus_two(grpc, np.array([2.0], np.float32), model_version="1", request_id="req-9")
    resp = r.get_response()
    assert resp.model_version == "1" and resp.id == "req-9"
    np.testing.assert_allclose(r.as_numpy("y"), [3.0])


@pytest.mark.parametrize("algorithm", [None, "gzip", "deflate"])
def test_compressed_requests(grpc, algorithm):
    x = np.arange(1000, dtype=np.float32)
    r = half_plus_two(grpc, x, compression_algorithm=algorithm)
    np.testing.assert_allclose(r.as_numpy("y"), x / 2 + 2)


def test_compressed_mobilenet_request(grpc):
    x = tabby()
    plain = mobilenet_infer(grpc, x).as_numpy("output")
    gz = mobilenet_infer(grpc, x, compression_algorithm="gzip").as_numpy("output")
    np.testing.assert_allclose(gz, plain, rtol=0, atol=1e-4)
    assert int(np.argmax(gz[0])) == 281


# ----------------------------------------------------------- classification


def test_classification_batched_with_labels(grpc):
    x = np.concatenate([tabby(), np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)])
    raw = mobilenet_infer(grpc, x).as_numpy("output")
    r = mobilenet_infer(grpc, x, outputs=[grpcclient.InferRequestedOutput("output", class_count=5)])
    out = r.get_output("output")
    assert out.datatype == "BYTES" and list(out.shape) == [2, 5]
    cls = r.as_numpy("output")
    with open(MODELS / "imagenet_synset.txt") as f:
        labels = [line.rstrip("\n").split(" ", 1)[1] for line in f]
    for b in range(2):
        parts = [s.decode().split(":", 2) for s in cls[b]]
        assert int(parts[0][1]) == int(np.argmax(raw[b]))
        for value, index, label in parts:
            assert label == labels[int(index)]
            assert abs(float(value) - raw[b][int(index)]) < 1e-4
    assert int(cls[0][0].decode().split(":")[1]) == 281 and "tabby" in cls[0][0].decode()


def test_classification_non_batching_model(grpc):
    x = np.zeros((1, 1, 28, 28), np.float32)
    x[0, 0, 4:24, 13:15] = 1.0  # a crude "1"
    inp = grpcclient.InferInput("Input3", [1, 1, 28, 28], "FP32")
    inp.set_data_from_numpy(x)
    raw = grpc.infer("mnist", [inp]).as_numpy("Plus214_Output_0").reshape(-1)
    r = grpc.infer("mnist", [inp], outputs=[grpcclient.InferRequestedOutput("Plus214_Output_0", class_count=3)])
    assert list(r.get_output("Plus214_Output_0").shape) == [3]  # max_batch_size 0: one list
    items = [c.decode() for c in r.as_numpy("Plus214_Output_0").tolist()]
    assert all(CLS_RE.match(s) for s in items), items
    assert [int(s.split(":")[1]) for s in items] == list(np.argsort(-raw, kind="stable")[:3])


# ------------------------------------------------------------------ errors


def test_unknown_model_version_and_output(grpc):
    with pytest.raises(InferenceServerException) as e:
        grpc.get_model_metadata("no_such_model")
    assert code_of(e) == "StatusCode.NOT_FOUND" and e.value.message()
    with pytest.raises(InferenceServerException) as e:
        grpc.get_model_config("mobilenet", "99")
    assert code_of(e) == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as e:
        half_plus_two(grpc, np.array([1.0], np.float32), model_version="7")
    assert code_of(e) == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as e:
        half_plus_two(grpc, np.array([1.0], np.float32), outputs=[grpcclient.InferRequestedOutput("nope")])
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT"


@pytest.mark.parametrize("name,shape,dtype", [("wrong_name", [2], "FP32"), ("x", [2, 2], "FP32"), ("x", [2], "INT32")])
def test_bad_infer_request_is_invalid_argument(grpc, name, shape, dtype):
    inp = grpcclient.InferInput(name, shape, dtype)
    inp.set_data_from_numpy(np.zeros(shape, np.float32 if dtype == "FP32" else np.int32))
    with pytest.raises(InferenceServerException) as e:
        grpc.infer("half_plus_two", [inp])
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT"
    assert e.value.message()


def test_classification_of_fp16_is_invalid_argument(grpc):
    inputs = []
    for name, (datatype, value) in ECHO.items():
        inp = grpcclient.InferInput(name, list(value.shape), datatype)
        inp.set_data_from_numpy(value)
        inputs.append(inp)
    with pytest.raises(InferenceServerException) as e:
        grpc.infer("dtype_echo", inputs, outputs=[grpcclient.InferRequestedOutput("fp16_out", class_count=1)])
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT" and "unsupported type" in e.value.message()


def test_raw_bytes_that_do_not_match_the_shape(grpc):
    inp = grpcclient.InferInput("x", [4], "FP32")
    inp.set_data_from_numpy(np.zeros([4], np.float32))
    inp.set_shape([5])  # 16 bytes for 5 elements
    with pytest.raises(InferenceServerException) as e:
        grpc.infer("half_plus_two", [inp])
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT"
    assert grpc.is_server_live() is True


# -------------------------------------------------------- model repository


def test_repository_index(grpc):
    index = grpc.get_model_repository_index()
    by_name = {m.name: m for m in index.models}
    m = by_name["mobilenet"]
    assert (m.version, m.state) == ("1", "READY")
    assert by_name["spare"].state in ("", "UNAVAILABLE")  # in the model root, not loaded
    as_json = {m["name"]: m for m in grpc.get_model_repository_index(as_json=True)["models"]}
    assert as_json["mobilenet"]["state"] == "READY"


def test_unload_then_load(grpc):
    grpc.unload_model("half_plus_two")
    try:
        with pytest.raises(InferenceServerException) as e:
            grpc.is_model_ready("half_plus_two")
        assert code_of(e) == "StatusCode.NOT_FOUND"
        states = {m.name: m.state for m in grpc.get_model_repository_index().models}
        assert states["half_plus_two"] == "UNAVAILABLE"
        with pytest.raises(InferenceServerException) as e:
            half_plus_two(grpc, np.array([1.0], np.float32))
        assert code_of(e) == "StatusCode.NOT_FOUND"
    finally:
        grpc.load_model("half_plus_two")
    assert grpc.is_model_ready("half_plus_two") is True
    np.testing.assert_allclose(half_plus_two(grpc, np.array([2.0], np.float32)).as_numpy("y"), [3.0])


def test_load_from_model_root_by_name(grpc):
    grpc.load_model("spare")
    try:
        assert grpc.is_model_ready("spare", "1")
        inp = grpcclient.InferInput("x", [1], "FP32")
        inp.set_data_from_numpy(np.array([4.0], np.float32))
        np.testing.assert_allclose(grpc.infer("spare", [inp]).as_numpy("y"), [4.0])
    finally:
        grpc.unload_model("spare", unload_dependents=True)
    with pytest.raises(InferenceServerException):
        grpc.is_model_ready("spare")


def test_load_errors(grpc):
    with pytest.raises(InferenceServerException) as e:
        grpc.load_model("not_in_any_root")
    assert code_of(e) == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as e:
        grpc.load_model("../escape")
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT"
    # Uploading a config or model files is refused: models only load from the model roots.
    with pytest.raises(InferenceServerException) as e:
        grpc.load_model("uploaded", config='{"backend":"onnxruntime"}', files={"file:1/model.onnx": b"\x08\x07"})
    assert code_of(e) == "StatusCode.UNIMPLEMENTED"


def test_management_guard(guarded_server):
    c = grpcclient.InferenceServerClient(guarded_server.grpc_url)
    auth = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        with pytest.raises(InferenceServerException) as e:
            c.load_model("spare")
        assert code_of(e) == "StatusCode.PERMISSION_DENIED" and "not permitted" in e.value.message()
        with pytest.raises(InferenceServerException) as e:
            c.load_model("spare", headers={"authorization": "Bearer wrong"})
        assert code_of(e) == "StatusCode.PERMISSION_DENIED"
        c.load_model("spare", headers=auth)
        assert c.is_model_ready("spare") is True
        with pytest.raises(InferenceServerException) as e:
            c.unload_model("spare")
        assert code_of(e) == "StatusCode.PERMISSION_DENIED"
        c.unload_model("spare", headers=auth)
        # Everything else stays open.
        assert c.is_model_ready("half_plus_two") is True
        assert len(c.get_model_repository_index().models) >= 1
        np.testing.assert_allclose(half_plus_two(c, np.array([0.0], np.float32)).as_numpy("y"), [2.0])
    finally:
        c.close()


# -------------------------------------------------------------- statistics


def test_statistics(grpc):
    def stat():
        s = grpc.get_inference_statistics("half_plus_two", as_json=True)
        (m,) = [m for m in s["model_stats"] if m["version"] == "1"]
        return m

    def count(m, key):
        return int(m["inference_stats"].get(key, {}).get("count", 0))

    before = stat()
    for _ in range(3):
        half_plus_two(grpc, np.array([1.0, 2.0], np.float32))
    after = stat()
    assert after["name"] == "half_plus_two"
    assert count(after, "success") - count(before, "success") == 3
    assert count(after, "queue") - count(before, "queue") == 3
    assert int(after["inference_count"]) >= int(before.get("inference_count", 0)) + 3
    assert int(after["execution_count"]) >= int(before.get("execution_count", 0)) + 3
    assert int(after["last_inference"]) > 0
    proto = grpc.get_inference_statistics("half_plus_two", "1")
    assert [s.version for s in proto.model_stats] == ["1"]
    assert proto.model_stats[0].inference_stats.compute_infer.ns > 0
    names = {m.name for m in grpc.get_inference_statistics().model_stats}
    assert {"half_plus_two", "mobilenet", "mnist", "dtype_echo"} <= names
