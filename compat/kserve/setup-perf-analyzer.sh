#!/usr/bin/env bash
# Installs Triton's perf_analyzer into .venv-perf-analyzer, best effort. On success it writes
# .venv-perf-analyzer/env (the LD_LIBRARY_PATH it needs); on failure .venv-perf-analyzer/unavailable
# says why, and the compatibility test skips with that reason.
#
# Why 2.51.0: PyPI's perf-analyzer package is a placeholder; tritonclient wheels bundle the binary
# only up to 2.60.0, and from 2.52.0 on it needs glibc 2.38 (Ubuntu 24.04). 2.51.0 runs on glibc
# 2.34+ (Debian 12). The binary links libb64.so.0d (Debian package libb64-0d) and, even on CPU-only
# hosts, libcudart.so.12 (from the nvidia-cuda-runtime-cu12 wheel).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.venv-perf-analyzer"
version="2.51.0"
fail() {
  mkdir -p "$venv"
  echo "$*" > "$venv/unavailable"
  rm -f "$venv/env"
  echo "perf_analyzer unavailable: $*" >&2
  exit 1
}
if [ -f "$venv/env" ] && [ "$(cat "$venv/version" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
[ "$(uname -m)" = "x86_64" ] || fail "the tritonclient wheels bundle perf_analyzer for x86_64 only"
rm -rf "$venv"
python3 -m venv "$venv" || fail "python3 -m venv failed"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "tritonclient==$version" nvidia-cuda-runtime-cu12 \
  || fail "pip could not install tritonclient==$version and nvidia-cuda-runtime-cu12"
[ -x "$venv/bin/perf_analyzer" ] || fail "tritonclient $version did not install bin/perf_analyzer"
libs="$(echo "$venv"/lib/python3*/site-packages/nvidia/cuda_runtime/lib)"
if ! ldconfig -p 2>/dev/null | grep -q 'libb64\.so\.0d'; then
  # No root needed: unpack the Debian package next to the binary.
  if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
    (cd "$venv" && apt-get download -qq libb64-0d >/dev/null 2>&1) || fail "libb64.so.0d is missing and apt-get download libb64-0d failed"
    dpkg-deb -x "$venv"/libb64-0d_*.deb "$venv/b64" || fail "could not unpack libb64-0d"
    libs="$libs:$(dirname "$(find "$venv/b64" -name 'libb64.so.0d' | head -1)")"
  else
    fail "libb64.so.0d is missing (install the libb64-0d package)"
  fi
fi
echo "LD_LIBRARY_PATH=$libs" > "$venv/env"
LD_LIBRARY_PATH="$libs" "$venv/bin/perf_analyzer" --version >/dev/null 2>&1 \
  || { rm -f "$venv/env"; fail "perf_analyzer $version does not start here (glibc $(ldd --version | head -1 | awk '{print $NF}'))"; }
echo "$version" > "$venv/version"
rm -f "$venv/unavailable"
