"""A short perf_analyzer (Triton's load generator, 2.51.0 binary) run against visionserve over
HTTP (binary and JSON tensors) and over gRPC (raw contents, plain and gzip-compressed).

perf_analyzer reads the model metadata, the model configuration and the server metadata, then
sends inference requests (binary tensors by default) and reads the statistics extension before
and after each measurement window; a successful run exercises all of them.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-perf-analyzer"


def perf_analyzer_env():
    unavailable = VENV / "unavailable"
    if unavailable.exists():
        pytest.skip(f"perf_analyzer unavailable: {unavailable.read_text().strip()}")
    env_file = VENV / "env"
    if not env_file.exists():
        pytest.skip("perf_analyzer not set up (compat/kserve/setup-perf-analyzer.sh)")
    env = dict(os.environ)
    key, _, value = env_file.read_text().strip().partition("=")
    env[key] = value
    return env


@pytest.mark.parametrize(
    "protocol,options",
    [
        ("http", ["--input-tensor-format", "binary", "--output-tensor-format", "binary"]),
        ("http", ["--input-tensor-format", "json", "--output-tensor-format", "json"]),
        ("grpc", []),
        ("grpc", ["--grpc-compression-algorithm", "gzip"]),
    ],
    ids=["http-binary", "http-json", "grpc", "grpc-gzip"],
)
def test_perf_analyzer_short_run(server, protocol, options):
    env = perf_analyzer_env()
    args = [
        str(VENV / "bin" / "perf_analyzer"),
        "-m", "mobilenet",
        "-u", server.url if protocol == "http" else server.grpc_url,
        "-i", protocol,
        "-b", "2",
        "--shape", "input:3,224,224",
        "--concurrency-range", "1:1",
        "--measurement-mode", "count_windows",
        "--measurement-request-count", "10",
        "--stability-percentage", "1000",
        "--max-trials", "3",
        *options,
    ]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    # Server-side statistics came from the statistics extension.
    count = re.search(r"Server:\s+Inference count: (\d+)", out.stdout)
    assert count is not None and int(count.group(1)) >= 20, out.stdout
    assert "Successful request count" in out.stdout
