"""TF Serving REST API through curl, as the TF Serving docs call it."""
import json
import subprocess

from conftest import IMAGES


def curl(*args):
    out = subprocess.run(
        ["curl", "-sS", "-w", "\n%{http_code}", *args], check=True, capture_output=True, text=True
    ).stdout
    body, _, code = out.rpartition("\n")
    return int(code), body


def test_status(server):
    code, body = curl(f"{server.rest}/v1/models/mobilenet")
    assert code == 200
    assert json.loads(body) == {
        "model_version_status": [
            {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ]
    }


def test_metadata(server):
    code, body = curl(f"{server.rest}/v1/models/mobilenet/metadata")
    assert code == 200
    meta = json.loads(body)
    assert meta["model_spec"]["name"] == "mobilenet"
    assert meta["model_spec"]["version"] == "1"
    sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert sig["inputs"]["input"]["dtype"] == "DT_FLOAT"
    assert [d["size"] for d in sig["inputs"]["input"]["tensor_shape"]["dim"]] == ["-1", "3", "224", "224"]


def test_row_and_columnar_predict_half_plus_two(server):
    # half_plus_two is added by the reload test; make sure it is there.
    code, body = curl(f"{server.rest}/v1/models/half_plus_two")
    if code == 404:
        import pytest

        pytest.skip("half_plus_two not loaded")
    code, body = curl("-d", '{"instances": [1.0, 2.0, 5.0]}', "-X", "POST", f"{server.rest}/v1/models/half_plus_two:predict")
    assert code == 200
    assert json.loads(body) == {"predictions": [2.5, 3.0, 4.5]}
    code, body = curl("-d", '{"inputs": {"x": [1.0, 2.0, 5.0]}}', f"{server.rest}/v1/models/half_plus_two:predict")
    assert code == 200
    assert json.loads(body) == {"outputs": [2.5, 3.0, 4.5]}


def test_mobilenet_row_predict_with_curl(server, tmp_path):
    import numpy as np
    from test_grpc_stubs import mobilenet_input

    body = json.dumps({"instances": mobilenet_input().tolist()})
    f = tmp_path / "req.json"
    f.write_text(body)
    code, out = curl("-H", "Content-Type: application/json", "--data-binary", f"@{f}", f"{server.rest}/v1/models/mobilenet:predict")
    assert code == 200
    preds = json.loads(out)["predictions"]
    assert int(np.argmax(preds[0])) == 281


def test_errors(server):
    code, body = curl(f"{server.rest}/v1/models/nope")
    assert code == 404 and "error" in json.loads(body)
    code, body = curl("-d", "{not json", f"{server.rest}/v1/models/mobilenet:predict")
    assert code == 400 and "error" in json.loads(body)
    code, body = curl("-d", '{"instances": [[1,2],[3]]}', f"{server.rest}/v1/models/mobilenet:predict")
    assert code == 400
    code, body = curl("-d", '{"instances": [1]}', f"{server.rest}/v1/models/mobilenet/versions/9:predict")
    assert code == 404
    code, body = curl("-d", '{"examples": []}', f"{server.rest}/v1/models/mobilenet:classify")
    assert code == 400 and "empty" in json.loads(body)["error"]
