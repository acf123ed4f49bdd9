# Sourced by the container scripts: the podman flags that work on these machines.
# runc (crun fails on the cgroup layout); explicit rlimits (the sandbox cannot raise
# podman's defaults: "error setting rlimit type 7: operation not permitted").
PODMAN_RUN_FLAGS=(--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1000:1000)
# Behind a TLS-intercepting egress proxy, npm inside builds and containers needs the host's
# CA bundle: mounted read-only and named by NODE_EXTRA_CA_CERTS, never copied into a layer.
HOST_CA_FLAGS=()
HOST_CA_RUN_FLAGS=()
host_ca=${HOST_CA:-auto}
if [ "$host_ca" = auto ]; then
  host_ca=0
  if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -s "${NODE_EXTRA_CA_CERTS:-}" ]; then
    host_ca=$NODE_EXTRA_CA_CERTS
  elif compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    host_ca=/etc/ssl/certs/ca-certificates.crt
  fi
fi
if [ "$host_ca" != 0 ]; then
  HOST_CA_FLAGS=(-v "$host_ca:/run/host-ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/host-ca.crt)
  HOST_CA_RUN_FLAGS=(-v "$host_ca:/run/host-ca.crt:ro" -e NODE_EXTRA_CA_CERTS=/run/host-ca.crt)
fi
