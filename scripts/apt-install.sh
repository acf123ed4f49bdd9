#!/usr/bin/env bash
# Installs a Debian package when one of the commands it provides is missing, for a test that needs
# it. Idempotent; needs root (or sudo) and apt; waits for another apt run holding the lock.
# Usage: apt-install.sh LABEL PACKAGE COMMAND... ; exits 0 when every COMMAND is present
# afterwards, 1 otherwise (the test then skips with the reason printed here).
set -u
label=$1 package=$2
shift 2
present() {
  for c in "$@"; do command -v "$c" >/dev/null 2>&1 || return 1; done
}
if present "$@"; then
  echo "$label: $(command -v "$1") is installed"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$label: no $1 and no apt-get: install $package yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "$label: not root and no sudo: install $package yourself" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
LOCK_WAIT="-o DPkg::Lock::Timeout=300"
$SUDO apt-get $LOCK_WAIT update -qq >/dev/null &&
  $SUDO apt-get $LOCK_WAIT install -y -qq --no-install-recommends "$package" >/dev/null
if present "$@"; then
  echo "$label: installed $package"
  exit 0
fi
echo "$label: $package could not be installed" >&2
exit 1
