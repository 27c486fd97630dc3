import { defineConfig } from "vitest/config";

/**
 * The container suite and the failure drills (`npm run test:e2e`): the images from
 * `npm run images`, run with podman through testcontainers. Kept out of the root `vitest run`,
 * which excludes e2e/src/containers/ (these need images and take minutes).
 */
const sock = process.env.INFERGRID_PODMAN_SOCK ?? "/run/infergrid/podman.sock";

export default defineConfig({
  resolve: { conditions: ["@infergrid/source"] },
  test: {
    root: new URL("..", import.meta.url).pathname,
    include: ["e2e/src/containers/**/*.test.ts"],
    globalSetup: ["e2e/src/containers/global-setup.ts"],
    env: { DOCKER_HOST: process.env.DOCKER_HOST ?? `unix://${sock}`, TESTCONTAINERS_RYUK_DISABLED: "true" },
    testTimeout: 180_000,
    hookTimeout: 240_000,
    pool: "forks",
    // One file at a time: each starts a whole cluster of containers on a 2-core machine.
    fileParallelism: false,
    reporters: ["default"],
  },
});
