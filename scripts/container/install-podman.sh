#!/usr/bin/env bash
# Installs what the container test needs (Debian/Ubuntu, as root): podman with runc (crun
# fails on the cgroup layout of these machines), debootstrap for the stand-in base image.
# Idempotent: a no-op when everything is there.
set -euo pipefail
need=()
for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || need+=("$tool"); done
[ ${#need[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "install-podman: missing ${need[*]}; run as root to install them" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "install-podman: missing ${need[*]} and no apt-get here" >&2; exit 1; }
t0=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# runc named explicitly: podman depends on "crun | runc" and crun does not work here.
apt-get install -y -qq --no-install-recommends \
  podman runc debootstrap uidmap slirp4netns fuse-overlayfs catatonit \
  netavark aardvark-dns containernetworking-plugins iptables >/dev/null
echo "install-podman: installed in $(($(date +%s) - t0)) s: $(podman --version), $(runc --version | head -1)" >&2
