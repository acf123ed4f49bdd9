"""TF Serving's --grpc_channel_arguments=grpc.max_connection_age_ms with the stock client: the
server sends GOAWAY as connections age, and the stub's calls, from several threads at once, all
succeed across the reconnections (gRPC moves new calls to a new connection and retries calls
the server refused while going away)."""
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import CLI, Server

AGE_MS = 300
SECONDS = 3.0
THREADS = 4


def test_calls_survive_connection_age_goaways():
    repo = Path(tempfile.mkdtemp(prefix="vs-compat-age-"))
    subprocess.run(["node", str(CLI), "generate-demo", str(repo)], check=True, stdout=subprocess.DEVNULL)
    config = repo / "models.config"
    config.write_text(
        f"model_config_list {{ config {{ name: 'half_plus_two' base_path: '{repo / 'half_plus_two'}' "
        "model_platform: 'onnx' } }\n"
    )
    server = Server(
        repo,
        config,
        extra_args=(
            f"--grpc_channel_arguments=grpc.max_connection_age_ms={AGE_MS},"
            "grpc.max_connection_age_grace_ms=5000,grpc.keepalive_time_ms=7200000",
        ),
    )
    states = []
    server.channel.subscribe(states.append, try_to_connect=True)
    try:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
        errors, answers = [], []

        def caller(seed):
            end = time.time() + SECONDS
            i = 0
            while time.time() < end:
                x = float(seed * 1000 + i)
                request = predict_pb2.PredictRequest()
                request.model_spec.name = "half_plus_two"
                request.inputs["x"].CopyFrom(tf.make_tensor_proto([x], dtype=tf.float32, shape=[1]))
                try:
                    out = stub.Predict(request, timeout=10)
                    answers.append((x, tf.make_ndarray(out.outputs["y"]).ravel()[0]))
                except grpc.RpcError as e:  # noqa: PERF203 - every failure is recorded
                    errors.append(f"{e.code()}: {e.details()}")
                i += 1

        threads = [threading.Thread(target=caller, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(answers) > 50, len(answers)
        assert all(abs(y - (0.5 * x + 2)) < 1e-3 * max(1.0, abs(x)) for x, y in answers)
        # The channel left READY on each GOAWAY (none at all without the age limit).
        ready = grpc.ChannelConnectivity.READY
        drops = sum(1 for a, b in zip(states, states[1:]) if a == ready and b != ready)
        assert drops >= 3, states
        # Every argument given was applied (keepalive too): no warning.
        assert "not applied by this server" not in server.logs()
    finally:
        server.channel.unsubscribe(states.append)
        server.stop()
        shutil.rmtree(repo, ignore_errors=True)
