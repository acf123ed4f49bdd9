"""The stock tritonclient.grpc stream (start_stream / async_stream_infer, i.e. ModelStreamInfer)
against visionserve, unchanged, on both HTTP/2 transports of the gRPC port (our own, the default,
and node:http2 with --grpc_transport=node).

One ModelStreamInferResponse per request, in request order, carrying the request's id; a request
that fails is reported on the stream as Triton reports it (error_message, the callback gets an
InferenceServerException) and the stream goes on.
"""
import queue
import shutil
import tempfile
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import Server
from test_tritonclient_grpc import tabby


@pytest.fixture(scope="module", params=["lean", "node"])
def stream_server(request):
    repo = Path(tempfile.mkdtemp(prefix=f"vs-kserve-stream-{request.param}-"))
    s = Server(repo, models=("mobilenet", "half_plus_two"), extra_args=(f"--grpc_transport={request.param}",))
    yield s
    s.stop()
    shutil.rmtree(repo, ignore_errors=True)


def collect(answers, result, error):
    answers.put((result, error))


def mobilenet_inputs(x):
    inp = grpcclient.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return [inp]


def test_64_requests_answered_in_order_with_their_ids(stream_server):
    client = grpcclient.InferenceServerClient(stream_server.grpc_url)
    answers = queue.Queue()
    client.start_stream(callback=partial(collect, answers))
    x = tabby()
    for i in range(64):
        client.async_stream_infer("mobilenet", mobilenet_inputs(x), request_id=f"req-{i}")
    got = [answers.get(timeout=120) for _ in range(64)]
    client.stop_stream()
    client.close()
    assert [e for _, e in got if e is not None] == []
    assert [r.get_response().id for r, _ in got] == [f"req-{i}" for i in range(64)]
    for r, _ in got:
        assert r.get_response().model_name == "mobilenet"
        assert int(np.argmax(r.as_numpy("output")[0])) == 281


def test_a_failed_request_is_reported_on_the_stream_and_the_stream_goes_on(stream_server):
    client = grpcclient.InferenceServerClient(stream_server.grpc_url)
    # What the unary ModelInfer answers for the same bad requests: the stream reports the same message.
    bad_shape = grpcclient.InferInput("x", [2, 2], "FP32")
    bad_shape.set_data_from_numpy(np.ones((2, 2), np.float32))
    with pytest.raises(InferenceServerException) as unary_missing:
        client.infer("no_such_model", mobilenet_inputs(tabby()))
    with pytest.raises(InferenceServerException) as unary_shape:
        client.infer("half_plus_two", [bad_shape])

    answers = queue.Queue()
    client.start_stream(callback=partial(collect, answers))
    good = grpcclient.InferInput("x", [3], "FP32")
    good.set_data_from_numpy(np.array([1.0, 2.0, 5.0], np.float32))
    client.async_stream_infer("no_such_model", mobilenet_inputs(tabby()), request_id="a")
    client.async_stream_infer("half_plus_two", [bad_shape], request_id="b")
    client.async_stream_infer("half_plus_two", [good], request_id="c")
    got = [answers.get(timeout=60) for _ in range(3)]
    client.stop_stream()
    client.close()
    (r0, e0), (r1, e1), (r2, e2) = got
    assert r0 is None and isinstance(e0, InferenceServerException)
    assert e0.message() == unary_missing.value.message()
    assert r1 is None and isinstance(e1, InferenceServerException)
    # Triton tags input errors with the request's id: the unary call had none, the stream's has "b".
    assert unary_shape.value.message().startswith("[request id: <id_unknown>] ")
    assert e1.message() == unary_shape.value.message().replace("<id_unknown>", "b", 1)
    assert e2 is None
    assert r2.get_response().id == "c"
    np.testing.assert_allclose(r2.as_numpy("y"), [2.5, 3.0, 4.5])


def test_two_streams_at_once_each_get_their_own_answers(stream_server):
    clients = [grpcclient.InferenceServerClient(stream_server.grpc_url) for _ in range(2)]
    queues = [queue.Queue() for _ in clients]
    for c, q in zip(clients, queues):
        c.start_stream(callback=partial(collect, q))
    for i in range(8):
        for k, c in enumerate(clients):
            x = grpcclient.InferInput("x", [1], "FP32")
            x.set_data_from_numpy(np.array([float(10 * k + i)], np.float32))
            c.async_stream_infer("half_plus_two", [x], request_id=f"{k}-{i}")
    for k, (c, q) in enumerate(zip(clients, queues)):
        got = [q.get(timeout=60) for _ in range(8)]
        c.stop_stream()
        c.close()
        assert [r.get_response().id for r, _ in got] == [f"{k}-{i}" for i in range(8)]
        assert [float(r.as_numpy("y")[0]) for r, _ in got] == [0.5 * (10 * k + i) + 2 for i in range(8)]
