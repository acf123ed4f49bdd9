#!/usr/bin/env bash
# Validates everything under deploy/ against the real Kubernetes, KServe, KEDA and
# prometheus-adapter types (go test in deploy/validate; docs/kubernetes.md says what is
# checked). Part of `npm test` (scripts/run-tests.mjs).
#
# Go modules come from the Go module proxy (GOPROXY as configured, default proxy.golang.org)
# into .cache/go/ in the repository (git-ignored), with the build cache beside them: the first
# run on a fresh clone downloads about 300 MB and compiles for a few minutes; later runs take
# seconds. VISIONSERVE_GO_CACHE=DIR puts both elsewhere; VISIONSERVE_SKIP_DEPLOY_VALIDATION=1
# skips this step (saying so).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ "${VISIONSERVE_SKIP_DEPLOY_VALIDATION:-0}" = 1 ]; then
  echo "deploy validation: skipped (VISIONSERVE_SKIP_DEPLOY_VALIDATION=1)" >&2
  exit 0
fi
command -v go >/dev/null || {
  echo "deploy validation needs Go >= 1.24 on PATH (or VISIONSERVE_SKIP_DEPLOY_VALIDATION=1)" >&2
  exit 1
}
cache="${VISIONSERVE_GO_CACHE:-$root/.cache/go}"
export GOMODCACHE="$cache/mod" GOCACHE="$cache/build" GOFLAGS="${GOFLAGS:+$GOFLAGS }-modcacherw"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# The smoke test runs the built CLI; under npm test it must not skip.
export VISIONSERVE_REQUIRE_SERVER_SMOKE="${VISIONSERVE_REQUIRE_SERVER_SMOKE:-1}"
cd "$root/deploy/validate"
start=$(date +%s)
go test -count=1 -parallel 4 "$@" ./...
echo "deploy validation: $(($(date +%s) - start)) s" >&2
