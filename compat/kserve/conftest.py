"""Starts a real visionserve process for the KServe v2 compatibility tests (stock tritonclient.http and .grpc)."""
import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
MODELS = SHARED / "models"
IMAGES = SHARED / "images"
CLI = ROOT / "packages" / "cli" / "bin" / "visionserve.js"
FIXTURES = ROOT / "scripts" / "generate-fixtures.mjs"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stage(root: Path, name: str, source: Path) -> Path:
    d = root / name / "1"
    d.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, d / "model.onnx")
    return root / name


ALL_MODELS = ("mobilenet", "mnist", "half_plus_two", "dtype_echo")


class Server:
    """visionserve with mobilenet (labels for classification), mnist (no batching), half_plus_two,
    dtype_echo (every datatype) configured, and `spare` (half_plus_two again) only in the model root.
    `models` picks the configured ones; `extra_args` go to `visionserve serve`."""

    def __init__(self, repo: Path, models=ALL_MODELS, extra_args=()):
        self.repo = repo
        mobilenet = stage(repo, "mobilenet", MODELS / "mobilenetv2-12-int8.onnx")
        shutil.copyfile(MODELS / "imagenet_synset.txt", mobilenet / "imagenet_synset.txt")
        (mobilenet / "visionserve.json").write_text(
            json.dumps(
                {
                    "postprocess": {
                        "kind": "classification",
                        "labels": "imagenet_synset.txt",
                        "labelsFormat": "synset",
                    }
                }
            )
        )
        stage(repo, "mnist", MODELS / "mnist-8.onnx")
        subprocess.run(["node", str(FIXTURES), str(repo), "half_plus_two", "dtype_echo"], check=True, capture_output=True)
        shutil.copytree(repo / "half_plus_two", repo / "spare")
        config = repo / "models.config"
        config.write_text(
            "model_config_list {\n"
            + "".join(
                f"  config {{ name: '{m}' base_path: '{repo / m}' model_platform: 'onnx' }}\n"
                for m in models
            )
            + "}\n"
        )
        self.rest_port = free_port()
        self.grpc_port = free_port()
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"  # inference.GRPCInferenceService beside TF Serving's
        self.url = f"127.0.0.1:{self.rest_port}"  # tritonclient takes host:port, no scheme
        self.base = f"http://{self.url}"
        self.log = open(repo / "server.log", "w+")
        self.proc = subprocess.Popen(
            [
                "node",
                str(CLI),
                "serve",
                f"--port={self.grpc_port}",
                f"--rest_api_port={self.rest_port}",
                "--sagemaker_port=-1",
                "--host=127.0.0.1",
                f"--model_config_file={config}",
                f"--model_roots={repo}",
                "--kserve_model_control_mode=explicit",
                "--file_system_poll_wait_seconds=0",
                *extra_args,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + self.logs())
            if "visionserve ready" in self.logs():
                return
            time.sleep(0.1)
        raise RuntimeError("server did not become ready:\n" + self.logs())

    def logs(self):
        self.log.flush()
        return (self.repo / "server.log").read_text()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="session")
def server():
    repo = Path(tempfile.mkdtemp(prefix="vs-kserve-compat-"))
    s = Server(repo)
    yield s
    s.stop()
    shutil.rmtree(repo, ignore_errors=True)


ADMIN_TOKEN = "compat-admin-token"


@pytest.fixture(scope="session")
def guarded_server():
    """half_plus_two only, with model management behind --admin_token_file."""
    repo = Path(tempfile.mkdtemp(prefix="vs-kserve-compat-guard-"))
    token = repo / "admin.token"
    token.write_text(ADMIN_TOKEN + "\n")
    s = Server(repo, models=("half_plus_two",), extra_args=(f"--admin_token_file={token}",))
    yield s
    s.stop()
    shutil.rmtree(repo, ignore_errors=True)


@pytest.fixture
def http(server):
    import tritonclient.http as httpclient

    c = httpclient.InferenceServerClient(server.url, network_timeout=60.0)
    yield c
    c.close()


@pytest.fixture
def grpc(server):
    import tritonclient.grpc as grpcclient

    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.close()
