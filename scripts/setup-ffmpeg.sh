#!/usr/bin/env bash
# Installs Debian's ffmpeg package (ffmpeg and ffprobe) for `visionserve video` and its tests,
# only when ffmpeg is missing. Idempotent; needs root (or sudo) and apt. Exits 0 when ffmpeg and
# ffprobe are present afterwards, 1 otherwise (the tests then skip with the reason).
set -u
if command -v ffmpeg >/dev/null 2>&1 && command -v ffprobe >/dev/null 2>&1; then
  echo "setup-ffmpeg: $(command -v ffmpeg) is installed"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-ffmpeg: no ffmpeg and no apt-get: install ffmpeg yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "setup-ffmpeg: not root and no sudo: install ffmpeg yourself" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt run (a second test, another setup script) may hold the lock: wait for it.
LOCK_WAIT="-o DPkg::Lock::Timeout=300"
$SUDO apt-get $LOCK_WAIT update -qq >/dev/null &&
  $SUDO apt-get $LOCK_WAIT install -y -qq --no-install-recommends ffmpeg >/dev/null
if command -v ffmpeg >/dev/null 2>&1 && command -v ffprobe >/dev/null 2>&1; then
  echo "setup-ffmpeg: installed $(ffmpeg -version 2>/dev/null | head -1)"
  exit 0
fi
echo "setup-ffmpeg: ffmpeg could not be installed" >&2
exit 1
