#!/usr/bin/env bash
# Creates .venv-kserve with the stock tritonclient[http] (and pytest), and, best effort,
# .venv-perf-analyzer with Triton's perf_analyzer binary. Idempotent: a venv whose
# requirements stamp matches is reused.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.venv-kserve"
stamp="$venv/.requirements.sha"
want="$(sha256sum "$root/compat/kserve/requirements.txt" | cut -c1-64)"
if ! { [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/compat/kserve/requirements.txt"
  echo "$want" > "$stamp"
fi
# perf_analyzer is optional: the suite skips its test (saying why) when this fails.
bash "$root/compat/kserve/setup-perf-analyzer.sh" || true
