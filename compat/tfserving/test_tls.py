"""The stock Python gRPC client over TLS and mutual TLS (TF Serving's --ssl_config_file)."""
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

from conftest import CLI, free_port


def openssl(cwd, *args):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d: Path, client_name="admin-client"):
    openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=compat CA",
            "-keyout", "ca.key", "-out", "ca.pem")
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
            "-out", "server.csr")
    openssl(d, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "server.ext", "-out", "server.pem")
    openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={client_name}", "-keyout", "client.key",
            "-out", "client.csr")
    openssl(d, "x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-out", "client.pem")


class TlsServer:
    def __init__(self, root: Path, client_verify: bool):
        self.root = root
        self.grpc_port = free_port()
        pem = lambda name: (root / name).read_text()  # noqa: E731
        # TF Serving's SSLConfig text format, PEM inline.
        config = root / "ssl.config"
        config.write_text(
            f"server_key: {repr_pem(pem('server.key'))}\n"
            f"server_cert: {repr_pem(pem('server.pem'))}\n"
            f"custom_ca: {repr_pem(pem('ca.pem'))}\n"
            f"client_verify: {'true' if client_verify else 'false'}\n"
        )
        subprocess.run(["node", str(CLI), "generate-demo", str(root / "models")], check=True, capture_output=True)
        self.log = open(root / "server.log", "w+")
        args = [
            "node", str(CLI), "serve", f"--port={self.grpc_port}", "--rest_api_port=-1", "--sagemaker_port=-1",
            "--host=127.0.0.1", "--model_name=half_plus_two",
            f"--model_base_path={root / 'models' / 'half_plus_two'}", f"--ssl_config_file={config}",
        ]
        if client_verify:
            args.append("--admin_client_names=admin-client")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + self.logs())
            if "visionserve ready" in self.logs():
                return
            time.sleep(0.1)
        raise RuntimeError("server did not become ready:\n" + self.logs())

    def logs(self):
        self.log.flush()
        return (self.root / "server.log").read_text()

    def channel(self, with_client_cert: bool):
        read = lambda name: (self.root / name).read_bytes()  # noqa: E731
        creds = grpc.ssl_channel_credentials(
            root_certificates=read("ca.pem"),
            private_key=read("client.key") if with_client_cert else None,
            certificate_chain=read("client.pem") if with_client_cert else None,
        )
        return grpc.secure_channel(f"127.0.0.1:{self.grpc_port}", creds,
                                   options=[("grpc.ssl_target_name_override", "localhost")])

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def repr_pem(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def predict_request():
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "half_plus_two"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0, 2.0, 5.0], np.float32)))
    return req


@pytest.fixture(scope="module")
def tls_dir():
    d = Path(tempfile.mkdtemp(prefix="vs-compat-tls-"))
    make_certs(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_predict_over_tls(tls_dir):
    server = TlsServer(tls_dir, client_verify=False)
    try:
        with server.channel(with_client_cert=False) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            out = tf.make_ndarray(stub.Predict(predict_request(), timeout=30).outputs["y"])
            assert out.tolist() == [2.5, 3.0, 4.5]
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as plain:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(plain)
            with pytest.raises(grpc.RpcError) as err:
                stub.Predict(predict_request(), timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()


def test_predict_and_reload_over_mutual_tls(tls_dir):
    server = TlsServer(tls_dir, client_verify=True)
    try:
        with server.channel(with_client_cert=True) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            out = tf.make_ndarray(stub.Predict(predict_request(), timeout=30).outputs["y"])
            assert out.tolist() == [2.5, 3.0, 4.5]
            # The client certificate's name is allowed to manage models (--admin_client_names).
            reload = model_management_pb2.ReloadConfigRequest()
            cfg = reload.config.model_config_list.config.add()
            cfg.name = "half_plus_two"
            cfg.base_path = str(tls_dir / "models" / "half_plus_two")
            resp = model_service_pb2_grpc.ModelServiceStub(channel).HandleReloadConfigRequest(reload, timeout=30)
            assert resp.status.error_code == 0
        with server.channel(with_client_cert=False) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            with pytest.raises(grpc.RpcError) as err:
                stub.Predict(predict_request(), timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()
