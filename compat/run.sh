#!/usr/bin/env bash
# Compatibility suites: the stock Python tensorflow-serving-api stubs and curl (compat/tfserving),
# and the stock tritonclient.http, curl and perf_analyzer for KServe v2 (compat/kserve), each
# against a real visionserve process. Each suite installs its own venv (idempotent).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/compat/setup.sh"
bash "$root/compat/kserve/setup.sh"
command -v curl >/dev/null || { echo "curl is required for the REST compatibility tests" >&2; exit 1; }
cd "$root"
TF_CPP_MIN_LOG_LEVEL=3 "$root/.venv-compat/bin/python" -m pytest -q -p no:cacheprovider compat/tfserving "$@"
"$root/.venv-kserve/bin/python" -m pytest -q -p no:cacheprovider --rootdir=compat/kserve compat/kserve "$@"
