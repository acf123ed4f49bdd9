#!/usr/bin/env bash
# Installs the Debian chromium package for the console's browser tests (Playwright drives it
# through executablePath), only when no chromium is installed. Idempotent; needs root (or
# sudo) and apt. Exits 0 when chromium is present afterwards, 1 otherwise (the tests then
# skip with the reason).
set -u
for bin in chromium chromium-browser; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "setup-browser: $(command -v "$bin") is installed"
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-browser: no chromium and no apt-get: install chromium yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "setup-browser: not root and no sudo: install chromium yourself" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
if command -v chromium >/dev/null 2>&1; then
  echo "setup-browser: installed $(chromium --version 2>/dev/null)"
  exit 0
fi
echo "setup-browser: chromium could not be installed" >&2
exit 1
