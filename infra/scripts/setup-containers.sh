#!/usr/bin/env bash
# Makes this Debian machine able to build and run the project's containers without a Docker
# engine: podman + runc from Debian, a containers.conf that works on these hosts (see
# infra/docker/containers.conf for why), and podman's Docker-compatible API on a known socket
# for testcontainers. Safe to run again: each step is skipped when done. Exports nothing: the
# container tests find the socket at $INFERGRID_PODMAN_SOCK (default /run/infergrid/podman.sock).
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '\033[1;34m[setup-containers]\033[0m %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = "0" ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    log "need root for: $*"; return 1; fi
}

SOCK="${INFERGRID_PODMAN_SOCK:-/run/infergrid/podman.sock}"

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  log "installing podman and runc (Debian packages)"
  as_root apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null
fi

# The packaged defaults fail here twice (setrlimit RLIMIT_NOFILE refused; crun cannot handle
# hybrid cgroups): this file lifts both. Installed system-wide so every podman call (the API
# service, the image script, a person debugging) behaves the same.
if ! cmp -s infra/docker/containers.conf /etc/containers/containers.conf 2>/dev/null; then
  log "installing /etc/containers/containers.conf"
  as_root mkdir -p /etc/containers
  as_root cp infra/docker/containers.conf /etc/containers/containers.conf
fi

# The images hold busybox's shell (wait strategies exec /bin/sh); the image script needs it.
if [ ! -x /bin/busybox ] || ! /bin/busybox --list 2>/dev/null | grep -qx sh || ! file -L /bin/busybox 2>/dev/null | grep -q 'statically linked'; then
  if ! dpkg -s busybox-static >/dev/null 2>&1; then
    log "installing busybox-static (the images' shell)"
    as_root apt-get update -qq >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
  fi
fi

socket_alive() { [ -S "$SOCK" ] && curl -fsS --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; }

# A service started from a checkout that was deleted since (a fresh clone per CI run) still answers
# pings, but conmon, which inherits its working directory, fails every container start ("Failed to
# get working directory", seen by testcontainers as "write child: broken pipe"): restart it.
for pid in $(pgrep -f "podman system service --time=0 unix://$SOCK" || true); do
  if readlink "/proc/$pid/cwd" 2>/dev/null | grep -q ' (deleted)$'; then
    log "restarting podman's API (its working directory was deleted)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$SOCK"
  fi
done

if ! socket_alive; then
  log "starting podman's Docker-compatible API on unix://$SOCK"
  as_root mkdir -p "$(dirname "$SOCK")"
  rm -f "$SOCK"
  # --time=0: never exit on idle; the tests may start minutes after this script.
  # Started from / so that its working directory (and its children's) outlives this checkout.
  (cd / && nohup podman system service --time=0 "unix://$SOCK" >"$(dirname "$SOCK")/podman-service.log" 2>&1 &)
  for _ in $(seq 1 100); do socket_alive && break; sleep 0.1; done
  socket_alive || { log "podman API did not come up; see $(dirname "$SOCK")/podman-service.log"; exit 1; }
fi

log "ready (podman $(podman --version | awk '{print $3}'), API at unix://$SOCK)"
