import { existsSync } from "node:fs";

/**
 * testcontainers talks to podman's Docker-compatible API (infra/scripts/setup-containers.sh starts
 * it on a known socket; no Docker engine runs on the project's machines). Ryuk, the reaper
 * container, is off: it needs an image from a registry; every test stops what it started.
 */
export default function setup(): void {
  const sock = process.env.INFERGRID_PODMAN_SOCK ?? "/run/infergrid/podman.sock";
  if (!process.env.DOCKER_HOST) {
    if (!existsSync(sock)) throw new Error(`no container API at ${sock}: run bash infra/scripts/setup-containers.sh`);
    process.env.DOCKER_HOST = `unix://${sock}`;
  }
  process.env.TESTCONTAINERS_RYUK_DISABLED = "true";
}
