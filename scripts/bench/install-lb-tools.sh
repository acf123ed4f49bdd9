#!/usr/bin/env bash
# Installs the load balancer and load generator that bench/replicas.mjs drives, from Debian:
# HAProxy (2.6 LTS in bookworm) and wrk. Idempotent: does nothing when both are there.
set -euo pipefail
if command -v haproxy >/dev/null && command -v wrk >/dev/null; then
  echo "install-lb-tools: $(haproxy -v | head -1); wrk $(dpkg-query -W -f '${Version}' wrk 2>/dev/null || echo present)" >&2
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install-lb-tools: run as root (apt-get)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends haproxy wrk >/dev/null
# Debian's package would start a service where systemd runs; the bench starts its own.
echo "install-lb-tools: $(haproxy -v | head -1)" >&2
