import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    // Workspace packages are read from source in tests (no build needed for unit tests); the
    // services that integration tests start as processes run their compiled dist/.
    conditions: ["@infergrid/source"],
  },
  test: {
    include: ["{proto,libs,services,infra,e2e}/**/src/**/*.test.ts", "e2e/**/*.test.ts"],
    exclude: ["**/node_modules/**", "**/dist/**", "e2e/src/containers/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Integration tests start up to twenty real processes each: on a 2-core machine they run one
    // file at a time so that no test measures another one's load.
    fileParallelism: false,
  },
});
