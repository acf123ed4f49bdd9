#!/usr/bin/env bash
# Where a gRPC c=1 request's time goes inside the server (README.md here). Applies marks.patch
# to packages/ (which must have no uncommitted changes), builds, serves MobileNetV2 int8 with
# trace.mjs preloaded, drives it with bench/peers' grpcio client at c=1, prints the steps, then
# takes the patch out again (git apply -R) and rebuilds, also when it fails or is interrupted.
#   bench/c1-phases/run.sh [kserve-grpc|tfs-grpc] [timed seconds, default 15]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${VISIONSERVE_SHARED:-$ROOT/../shared}
KIND=${1:-kserve-grpc}
TIMED=${2:-15}
PY=$ROOT/bench/peers/.venv-client/bin/python
cd "$ROOT"
if [ -n "$(git status --porcelain -- packages)" ]; then
  echo "c1-phases: packages/ has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
[ -x "$PY" ] || bench/peers/setup.sh
WORK=$(mktemp -d)
SERVER=
restore() {
  trap - EXIT INT TERM
  if [ -n "$SERVER" ]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
  git apply -R "$HERE/marks.patch" ||
    echo "c1-phases: marks.patch did not come out of packages/; take it out by hand (git apply -R)" >&2
  npm run --silent build >/dev/null || echo "c1-phases: the rebuild failed; run npm run build" >&2
  rm -rf "$WORK"
}
trap restore EXIT
# A signal ends the script after its current command, through restore.
trap 'exit 130' INT TERM
git apply "$HERE/marks.patch"
npm run --silent build >/dev/null
mkdir -p "$WORK/model/1" && cp "$SHARED/models/mobilenetv2-12-int8.onnx" "$WORK/model/1/model.onnx"
node bench/peers/request-tensor.mjs "$SHARED/images/cat_tabby.jpg" "$WORK/request" >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MALLOC_MMAP_THRESHOLD_=134217728 MALLOC_TRIM_THRESHOLD_=268435456 \
  node --import "$HERE/trace.mjs" packages/cli/bin/visionserve.js serve --host=127.0.0.1 \
  --port="$PORT" --rest_api_port=-1 --sagemaker_port=-1 --model_name=mobilenet --model_base_path="$WORK/model" \
  --file_system_poll_wait_seconds=0 --log_level=warn --enable_serialization_as_tensor_content=true \
  --max_queue_wait_ms=0 2> "$WORK/server.err" &
SERVER=$!
for i in $(seq 101); do
  (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  if [ "$i" = 101 ] || ! kill -0 "$SERVER" 2>/dev/null; then
    echo "c1-phases: the server did not start listening:" >&2
    cat "$WORK/server.err" >&2
    exit 1
  fi
  sleep 0.2
done
# A warm-up block as long as the timed one (V8 compiles the hot paths), then the timed block.
"$PY" bench/peers/loadgen.py --kind "$KIND" --target "127.0.0.1:$PORT" --tensor "$WORK/request" \
  --concurrency 1 --seconds "$TIMED" --warmup "$TIMED" --pid "$SERVER" | tail -1
kill -TERM "$SERVER"
wait "$SERVER" || true
SERVER=
grep -A40 '^c1-phases' "$WORK/server.err"
