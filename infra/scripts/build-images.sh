#!/usr/bin/env bash
# Builds every image locally with podman and no registry:
#   localhost/node-base:local    Node + a shell + a non-root user, made from this machine's own files
#   localhost/node-build:local   the same plus npm and pnpm (the build stage's base)
#   localhost/nats:local         Debian's nats-server (JetStream included) + a shell for waits
#   localhost/infergrid-<service>:local for broker, frontend, backend-worker, predictor, global-allocator, console
# from infra/docker/Dockerfile with BASE_IMAGE/BUILD_IMAGE pointing at the local bases. Elsewhere the
# same Dockerfile builds from public Node images (its defaults). Needs infra/scripts/setup-containers.sh.
# Options (env): SERVICES="broker frontend" to build a subset; REBUILD_BASE=1 to remake the bases.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '\033[1;34m[images]\033[0m %s\n' "$*" >&2; }
as_root() {
  if [ "$(id -u)" = "0" ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    log "need root for: $*"; return 1; fi
}

command -v podman >/dev/null 2>&1 || bash infra/scripts/setup-containers.sh
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  as_root apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
fi

SERVICES="${SERVICES-broker frontend backend-worker predictor global-allocator console}"
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Copies a binary and every library the dynamic loader needs into a rootfs, at the same paths.
copy_with_libs() {
  local rootfs=$1 bin=$2
  install -D -m 0755 "$(readlink -f "$bin")" "$rootfs$bin"
  ldd "$bin" | awk '/=> \//{print $3} /^[[:space:]]*\/lib/{print $1}' | while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
  done
}

# A minimal filesystem: busybox's shell (wait strategies and health waits run /bin/sh), /tmp,
# and /etc/passwd with root and a non-root user `$user` (uid/gid 1000).
make_skeleton() {
  local rootfs=$1 user=$2
  mkdir -p "$rootfs"/{bin,usr/bin,etc,tmp,root,home/"$user",lib64}
  chmod 1777 "$rootfs/tmp"
  install -m 0755 /bin/busybox "$rootfs/bin/busybox"
  for applet in sh ls cat env sleep kill ps wget nc grep sed head tail mkdir rm cp mv id hostname ip netstat; do
    ln -sf busybox "$rootfs/bin/$applet"
  done
  ln -sf ../../bin/env "$rootfs/usr/bin/env"
  printf 'root:x:0:0:root:/root:/bin/sh\n%s:x:1000:1000:%s:/home/%s:/bin/sh\n' "$user" "$user" "$user" >"$rootfs/etc/passwd"
  printf 'root:x:0:\n%s:x:1000:\n' "$user" >"$rootfs/etc/group"
  printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
  chown 1000:1000 "$rootfs/home/$user"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"; fi
}

import_rootfs() {
  local rootfs=$1 tag=$2; shift 2
  tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
  podman import --quiet "$@" "$work/rootfs.tar" "$tag" >/dev/null
  rm -f "$work/rootfs.tar"
}

# The base images carry the hash of this script: a changed recipe remakes them.
recipe=$(sha256sum "$0" | cut -c1-16)
have_image() {
  [ -z "${REBUILD_BASE:-}" ] && podman image exists "$1" &&
    [ "$(podman image inspect --format '{{ index .Labels "infergrid.recipe" }}' "$1" 2>/dev/null)" = "$recipe" ]
}

if ! have_image localhost/node-base:local || ! have_image localhost/node-build:local; then
  log "making localhost/node-base:local from $(command -v node) ($(node --version))"
  rootfs=$work/node
  make_skeleton "$rootfs" node
  copy_with_libs "$rootfs" "$(command -v node)"
  # The whole C runtime, as a slim Debian base has it: native addons (onnxruntime-node's binding
  # needs librt, for one) load libraries that node itself does not.
  for lib in $(dpkg -L libc6 libstdc++6 libgcc-s1 | grep -E '^/(usr/)?lib/x86_64-linux-gnu/[^/]+\.so[.0-9]*$'); do
    [ -e "$lib" ] && install -D -m 0755 "$(readlink -f "$lib")" "$rootfs/lib/x86_64-linux-gnu/$(basename "$lib")"
  done
  import_rootfs "$rootfs" localhost/node-base:local --change "LABEL infergrid.recipe=$recipe" \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'USER 1000:1000' --change 'WORKDIR /home/node' --change 'CMD ["node"]'
  log "making localhost/node-build:local (adds npm and pnpm)"
  for tool in npm pnpm; do
    src=$(npm root -g 2>/dev/null)/$tool
    [ -d "$src" ] || { log "$tool is not installed globally (npm i -g $tool)"; exit 1; }
    mkdir -p "$rootfs/usr/lib/node_modules"
    cp -a "$src" "$rootfs/usr/lib/node_modules/$tool"
  done
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/bin/npx"
  ln -sf ../lib/node_modules/pnpm/bin/pnpm.cjs "$rootfs/usr/bin/pnpm"
  # The build stage reaches the npm registry through this machine's trust store (which may hold a
  # proxy's CA): the image trusts what the machine trusts. Only the build image; never a runtime one.
  import_rootfs "$rootfs" localhost/node-build:local --change "LABEL infergrid.recipe=$recipe" --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' --change 'CMD ["node"]'
  rm -rf "$rootfs"
fi

if ! have_image localhost/nats:local; then
  nats_bin=$(command -v nats-server || echo /usr/sbin/nats-server)
  log "making localhost/nats:local from $nats_bin ($("$nats_bin" --version))"
  rootfs=$work/nats
  make_skeleton "$rootfs" nats
  mkdir -p "$rootfs/usr/sbin" "$rootfs/data"
  chown 1000:1000 "$rootfs/data"
  copy_with_libs "$rootfs" "$nats_bin"
  [ "$nats_bin" = /usr/sbin/nats-server ] || ln -sf "$nats_bin" "$rootfs/usr/sbin/nats-server"
  # Client port 4222, monitoring 8222 (/healthz), JetStream under /data.
  import_rootfs "$rootfs" localhost/nats:local --change "LABEL infergrid.recipe=$recipe" \
    --change 'ENV PATH=/usr/sbin:/usr/bin:/bin' --change 'USER 1000:1000' --change 'EXPOSE 4222' --change 'EXPOSE 8222' \
    --change 'ENTRYPOINT ["/usr/sbin/nats-server"]' --change 'CMD ["-js", "-sd", "/data", "-m", "8222"]'
  rm -rf "$rootfs"
fi

# Every target builds from one snapshot of the sources, so the shared build stage runs once (the
# targets reuse its cached layers) even while files change under the work tree.
if [ -n "$SERVICES" ]; then
  mkdir -p "$work/context"
  tar --exclude=node_modules --exclude=dist --exclude='*.tsbuildinfo' --exclude=.git --exclude=.runtime --exclude=coverage \
    --exclude=proto/src/gen -cf - . | tar -C "$work/context" -xf -
fi
for svc in $SERVICES; do
  log "building localhost/infergrid-$svc:local"
  t0=$(date +%s)
  podman build --layers --target "$svc" \
    --build-arg BASE_IMAGE=localhost/node-base:local --build-arg BUILD_IMAGE=localhost/node-build:local \
    -f infra/docker/Dockerfile --ignorefile infra/docker/Dockerfile.dockerignore \
    -t "localhost/infergrid-$svc:local" "$work/context" >"$work/build-$svc.log" 2>&1 || {
    tail -n 40 "$work/build-$svc.log" >&2; log "building $svc failed"; exit 1; }
  log "  $svc: $(($(date +%s) - t0)) s"
done

log "done in $(($(date +%s) - start)) s"
podman images --filter reference='localhost/*' --format '{{.Repository}}:{{.Tag}}  {{.Size}}' >&2
