"""Starts a real visionserve process for the stock-client compatibility tests."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
MODELS = SHARED / "models"
IMAGES = SHARED / "images"
CLI = ROOT / "packages" / "cli" / "bin" / "visionserve.js"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stage(root: Path, name: str, version: int, source: Path):
    d = root / name / str(version)
    d.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, d / "model.onnx")
    return root / name


class Server:
    def __init__(self, repo: Path, config_file: Path, extra_args=(), ready_timeout=60):
        self.repo = repo
        self.config_file = config_file
        self.grpc_port = free_port()
        self.rest_port = free_port()
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
                f"--model_config_file={config_file}",
                "--file_system_poll_wait_seconds=1",
                *extra_args,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.rest = f"http://127.0.0.1:{self.rest_port}"
        self.channel = grpc.insecure_channel(
            f"127.0.0.1:{self.grpc_port}",
            options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)],
        )
        deadline = time.time() + ready_timeout
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
        self.channel.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="session")
def server():
    repo = Path(tempfile.mkdtemp(prefix="vs-compat-"))
    mobilenet = stage(repo, "mobilenet", 1, MODELS / "mobilenetv2-12-int8.onnx")
    detector = stage(repo, "detector", 1, MODELS / "yolox_nano_tfod.onnx")
    subprocess.run(["node", str(CLI), "generate-demo", str(repo)], check=True)
    config = repo / "models.config"
    config.write_text(
        f"""
model_config_list {{
  config {{ name: 'mobilenet' base_path: '{mobilenet}' model_platform: 'onnx' }}
  config {{ name: 'detector' base_path: '{detector}' model_platform: 'onnx' }}
}}
"""
    )
    s = Server(repo, config)
    yield s
    s.stop()
    shutil.rmtree(repo, ignore_errors=True)


CACHE = ROOT / "compat" / ".cache"


@pytest.fixture(scope="session")
def savedmodels():
    """The suite's SavedModels (written by TensorFlow once, then reused; see savedmodels.py)."""
    from savedmodels import saved_models

    return saved_models(CACHE / "savedmodels")


@pytest.fixture(scope="session")
def tf_server(savedmodels):
    """A server of TensorFlow SavedModels, converted on load by this very venv (tensorflow + tf2onnx);
    conversions are cached in compat/.cache/conversions by content hash."""
    from savedmodels import CNN_VISION_CONFIG

    repo = Path(tempfile.mkdtemp(prefix="vs-compat-tf-"))
    for name, version_dir in (("half_plus_two", savedmodels["half_plus_two"]), ("cnn", savedmodels["cnn"])):
        (repo / name).mkdir()
        (repo / name / "1").symlink_to(version_dir)
    (repo / "cnn" / "visionserve.json").write_text(json.dumps(CNN_VISION_CONFIG))
    # The same SavedModel without the image settings: its serving_bytes cannot be served.
    (repo / "cnn_no_config").mkdir()
    (repo / "cnn_no_config" / "1").symlink_to(savedmodels["cnn"])
    subprocess.run(
        ["node", str(ROOT / "scripts" / "generate-fixtures.mjs"), str(repo), "half_plus_two_fp16"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    config = repo / "models.config"
    config.write_text(
        """
model_config_list {
  config { name: 'half_plus_two' base_path: 'half_plus_two' model_platform: 'tensorflow' }
  config { name: 'cnn' base_path: 'cnn' model_platform: 'tensorflow' }
  config { name: 'cnn_no_config' base_path: 'cnn_no_config' model_platform: 'tensorflow' }
  config { name: 'fp16' base_path: 'half_plus_two_fp16' }
}
"""
    )
    s = Server(
        repo,
        config,
        extra_args=[
            f"--saved_model_converter_python={sys.executable}",
            f"--saved_model_cache_dir={CACHE / 'conversions'}",
            # cnn_no_config loads without serving_bytes (its status names the ops).
            "--wait_for_models=true",
        ],
        ready_timeout=600,
    )
    yield s
    s.stop()
    shutil.rmtree(repo, ignore_errors=True)
