#!/usr/bin/env bash
# Installs Debian's rtsp-server-perl (a small RTSP server: sources publish with ANNOUNCE/RECORD,
# e.g. `ffmpeg -f rtsp rtsp://127.0.0.1:5545/name`, clients play rtsp://127.0.0.1:554/name over
# RTP/UDP) for the RTSP source test of `visionserve video`, only when it is missing. Idempotent;
# needs root (or sudo) and apt. Exits 0 when rtsp-server-perl is present afterwards, 1 otherwise
# (the test then skips with the reason).
set -u
if command -v rtsp-server-perl >/dev/null 2>&1; then
  echo "setup-rtsp-server: $(command -v rtsp-server-perl) is installed"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-rtsp-server: no rtsp-server-perl and no apt-get: install it yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "setup-rtsp-server: not root and no sudo: install rtsp-server-perl yourself" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
LOCK_WAIT="-o DPkg::Lock::Timeout=300"
$SUDO apt-get $LOCK_WAIT update -qq >/dev/null &&
  $SUDO apt-get $LOCK_WAIT install -y -qq --no-install-recommends rtsp-server-perl >/dev/null
if command -v rtsp-server-perl >/dev/null 2>&1; then
  echo "setup-rtsp-server: installed rtsp-server-perl"
  exit 0
fi
echo "setup-rtsp-server: rtsp-server-perl could not be installed" >&2
exit 1
