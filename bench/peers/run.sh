#!/usr/bin/env bash
# Peer comparison: visionserve, KServe (Python), PyTriton and MLServer serving MobileNetV2 int8 on
# loopback, driven by one Python grpcio client with the same request; see README.md.
#   bench/peers/run.sh [run_peers.py options, e.g. --servers visionserve,kserve --seconds 10]
# Also `npm run bench:peers -- [options]`. Creates the venvs on first use (setup.sh, several
# minutes), builds visionserve (npm run build), preprocesses the image once, then runs run_peers.py.
# Results: bench/results/peers/<time>/{results.md,results.json,<server>.log} (not committed, as `npm run
# bench`'s bench/results/latest); bench/results/peers/latest links to the newest.
# Environment: VISIONSERVE_SHARED (default <repo>/../shared: models/ and images/).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${VISIONSERVE_SHARED:-$ROOT/../shared}
MODEL=$SHARED/models/mobilenetv2-12-int8.onnx
IMAGE=$SHARED/images/cat_tabby.jpg
for f in "$MODEL" "$IMAGE"; do
  [ -f "$f" ] || { echo "run.sh: missing $f (set VISIONSERVE_SHARED)" >&2; exit 2; }
done

"$HERE/setup.sh"
(cd "$ROOT" && npm run --silent build)

OUT=$ROOT/bench/results/peers/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
node "$HERE/request-tensor.mjs" "$IMAGE" "$OUT/request"
status=0
"$HERE/.venv-client/bin/python" "$HERE/run_peers.py" --model-path "$MODEL" --tensor "$OUT/request" \
  --out "$OUT" "$@" || status=$?
ln -sfn "$OUT" "$ROOT/bench/results/peers/latest"
echo "results: $OUT/results.md"
exit $status
