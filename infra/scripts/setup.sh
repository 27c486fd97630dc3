#!/usr/bin/env bash
# Every set-up step for a fresh Debian machine that has only Node and npm: pnpm, the workspace's
# dependencies, a real nats-server, Chromium for the console's browser test, promtool for the alert
# rules' tests, and the build. Safe to run again: each step is skipped when done.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = "0" ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    log "need root for: $*"; return 1; fi
}

if ! command -v pnpm >/dev/null 2>&1; then
  log "installing pnpm 10 (npm i -g pnpm@10)"
  npm i -g pnpm@10 >/dev/null 2>&1 || as_root npm i -g pnpm@10
fi

if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ] && [ -z "${NATS_SERVER_BIN:-}" ]; then
  log "installing nats-server (Debian package)"
  as_root apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
  # The package enables a system service; this project starts its own servers on its own ports.
  as_root systemctl disable --now nats-server >/dev/null 2>&1 || true
fi

if ! command -v openssl >/dev/null 2>&1; then
  # The TLS tests make a throwaway CA and certificates with the openssl CLI.
  log "installing openssl (Debian package)"
  as_root apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
fi

if ! command -v chromium >/dev/null 2>&1 && [ -z "${CHROMIUM_BIN:-}" ]; then
  # The console's end-to-end test opens it in headless Chromium (Debian's package, driven by playwright-core;
  # nothing is downloaded from elsewhere).
  log "installing chromium (Debian package)"
  as_root apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

if ! command -v promtool >/dev/null 2>&1 && [ ! -x .tools/promtool ]; then
  # promtool alone, out of Debian's prometheus package (the package installs ~316 MiB with its web UI's
  # dependencies; this is one 48 MiB binary), into .tools/ (gitignored), for the alert rules' unit tests.
  log "fetching promtool (from Debian's prometheus package)"
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 || { as_root apt-get update -qq >/dev/null && apt-get download prometheus >/dev/null; }; })
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  mkdir -p .tools && install -m 0755 "$tmp/x/usr/bin/promtool" .tools/promtool
  rm -rf "$tmp"
fi

stamp=node_modules/.infergrid-install-stamp
if [ ! -f "$stamp" ] || [ pnpm-lock.yaml -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
  log "installing dependencies (pnpm install --frozen-lockfile)"
  pnpm install --frozen-lockfile --reporter=silent
  touch "$stamp"
fi

log "building (protos + TypeScript)"
pnpm run --silent build
# The ResNet-18 ONNX model (random weights from a fixed seed) is generated here, never downloaded.
node libs/models/dist/generate-models.js
log "ready"
