#!/usr/bin/env bash
# Creates the peer benchmark's Python environments from the pinned requirement files, idempotently:
#   .venv-client    the load generator and the onnxruntime floor (grpcio, protobuf 7, onnxruntime)
#   .venv-kserve    KServe 0.21 Python model server
#   .venv-mlserver  MLServer 1.7.1 (uvloop pinned to 0.21.0: 0.22+ breaks its parallel workers)
#   .venv-pytriton  PyTriton 0.7.0 (bundles tritonserver; needs numpy < 2)
# and generates the client's Python message modules from the repository's own .proto files
# (packages/protocol/proto) into .gen/.
#
# A venv whose requirement file changed since it was built is rebuilt; an intact one is kept.
# Usage: bench/peers/setup.sh [client kserve mlserver pytriton]   (default: all four)
# Environment: PYTHON (default python3.11; every pin was resolved on CPython 3.11).
# kserve and mlserver cannot share a venv (kserve 0.21 needs starlette >= 1.3.1, mlserver 1.7.1
# needs fastapi < 0.116); pytriton 0.7.0 needs numpy < 2.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3.11}
cd "$HERE"

venvs=("$@")
[ ${#venvs[@]} -gt 0 ] || venvs=(client kserve mlserver pytriton)

for v in "${venvs[@]}"; do
  req="requirements-$v.txt"
  [ -f "$req" ] || { echo "setup: no $req" >&2; exit 2; }
  dir=".venv-$v"
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
    echo "setup: $dir up to date"
    continue
  fi
  echo "setup: building $dir from $req (a few minutes)"
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check --upgrade pip
  # --no-deps: the files are complete pip freezes, so nothing unpinned comes in.
  "$dir/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req"
  "$dir/bin/pip" check
  echo "$want" >"$dir/.requirements.sha256"
done

if [ -x .venv-client/bin/python ]; then
  # Message modules only (the load generator sends pre-serialized bytes on raw method paths).
  rm -rf .gen && mkdir -p .gen
  P="$ROOT/packages/protocol/proto"
  .venv-client/bin/python -m grpc_tools.protoc -I"$P" --python_out=.gen \
    inference/inference.proto \
    tensorflow_serving/apis/predict.proto tensorflow_serving/apis/model.proto \
    $(cd "$P" && ls tensorflow/core/framework/*.proto)
  echo "setup: generated .gen/ from packages/protocol/proto"
fi
echo "setup ok"
