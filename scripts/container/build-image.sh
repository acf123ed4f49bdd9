#!/usr/bin/env bash
# Builds the visionserve image from the repository's Containerfile with podman.
#   scripts/container/build-image.sh [TAG]      (default localhost/visionserve:dev)
# Builds the stand-in base image first when it is missing (build-base-image.sh). Layer cache
# and the npm cache mount are kept, so a rebuild with no change takes seconds.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TAG=${1:-localhost/visionserve:dev}
# shellcheck source=podman-flags.sh
. "$HERE/podman-flags.sh"
"$HERE/build-base-image.sh"
t0=$(date +%s%N)
podman build "${PODMAN_RUN_FLAGS[@]}" "${HOST_CA_FLAGS[@]}" -f "$ROOT/Containerfile" -t "$TAG" "$ROOT" >&2
t1=$(date +%s%N)
size=$(podman image inspect --format '{{.Size}}' "$TAG")
printf 'build-image: %s built in %d.%d s, %d MB\n' "$TAG" "$(((t1 - t0) / 1000000000))" \
  "$(((t1 - t0) / 100000000 % 10))" "$((size / 1000000))" >&2
