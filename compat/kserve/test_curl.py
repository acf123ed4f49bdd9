"""The curl examples of the KServe section of docs/apis.md (once the README's), run as written (port substituted)."""
import json
import subprocess

import pytest

# Each example is a shell snippet against localhost:8501; the test points it at the test server.
EXAMPLES = {
    "ready": "curl -s localhost:8501/v2/health/ready",
    "metadata": "curl -s localhost:8501/v2/models/mobilenet",
    "infer_json": (
        "curl -s -d '{\"id\":\"1\",\"inputs\":[{\"name\":\"x\",\"shape\":[3],\"datatype\":\"FP32\",\"data\":[1,2,5]}]}' "
        "localhost:8501/v2/models/half_plus_two/infer"
    ),
    "infer_binary": r"""
printf '%s' '{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}],"outputs":[{"name":"y","parameters":{"binary_data":false}}]}' > req.bin
len=$(wc -c < req.bin)
printf '\x00\x00\x80\x3f\x00\x00\x00\x40' >> req.bin   # 1.0 and 2.0, little-endian FP32
curl -s --data-binary @req.bin -H "Inference-Header-Content-Length: $len" localhost:8501/v2/models/half_plus_two/infer
""",
    "stats": "curl -s localhost:8501/v2/models/half_plus_two/stats",
    "index": "curl -s -X POST localhost:8501/v2/repository/index",
    "load_unload": (
        "curl -s -X POST localhost:8501/v2/repository/models/spare/load && "
        "curl -s -X POST localhost:8501/v2/repository/models/spare/unload"
    ),
}


def run(server, tmp_path, name):
    script = EXAMPLES[name].replace("localhost:8501", server.url)
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True, capture_output=True, text=True)
    return out.stdout


def test_curl_examples(server, tmp_path):
    if subprocess.run(["bash", "-c", "command -v curl"], capture_output=True).returncode != 0:
        pytest.skip("curl is not installed")
    assert json.loads(run(server, tmp_path, "ready")) == {"ready": True}
    assert json.loads(run(server, tmp_path, "metadata"))["inputs"][0]["shape"] == [-1, 3, 224, 224]
    assert json.loads(run(server, tmp_path, "infer_json")) == {
        "model_name": "half_plus_two",
        "model_version": "1",
        "id": "1",
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [3], "data": [2.5, 3, 4.5]}],
    }
    assert json.loads(run(server, tmp_path, "infer_binary"))["outputs"][0]["data"] == [2.5, 3]
    stats = json.loads(run(server, tmp_path, "stats"))["model_stats"][0]
    assert stats["inference_stats"]["success"]["count"] >= 2
    assert {"name": "mobilenet", "version": "1", "state": "READY"} in json.loads(run(server, tmp_path, "index"))
    assert run(server, tmp_path, "load_unload") == "{}{}"
