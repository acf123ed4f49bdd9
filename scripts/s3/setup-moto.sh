#!/usr/bin/env bash
# Installs moto's standalone S3 server (PyPI) into .venv-moto for the S3 tests. Idempotent: a
# no-op when the pinned version is there. Slim install (moto[s3] + flask + flask-cors): all that
# moto_server needs for S3 and for the IAM calls that switch authentication on.
# Usage: scripts/s3/setup-moto.sh   (MOTO_VENV overrides the venv path)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VERSION=5.2.5
VENV=${MOTO_VENV:-$ROOT/.venv-moto}
if [ -x "$VENV/bin/moto_server" ] &&
  "$VENV/bin/python" -c "import moto,sys; sys.exit(moto.__version__ != '$VERSION')" 2>/dev/null; then
  exit 0
fi
t0=$(date +%s)
# A fresh Debian has python3 without venv/ensurepip (package python3-venv): install it as root.
if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null; }
  else
    echo "setup-moto: python3 with the venv module is required (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "moto[s3]==$VERSION" 'flask<4' 'flask-cors<7'
echo "setup-moto: moto $VERSION installed in $(($(date +%s) - t0)) s into $VENV" >&2
