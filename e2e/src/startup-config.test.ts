import { spawnSync } from "node:child_process";
import { serviceEntry } from "@infergrid/testkit";
import { describe, expect, it } from "vitest";

/** Every service validates its configuration before it does anything: a bad value stops it with status 2. */
describe("start-up configuration", () => {
  const cases = [
    { service: "broker", env: { INFERGRID_HTTP_PORT: "http" }, names: "--http-port / INFERGRID_HTTP_PORT" },
    { service: "frontend", env: { INFERGRID_SCALING: "magic" }, names: "--scaling / INFERGRID_SCALING" },
    { service: "backend-worker", env: { INFERGRID_CONCURRENCY: "0" }, names: "--concurrency / INFERGRID_CONCURRENCY" },
    { service: "global-allocator", env: { INFERGRID_GRPC_PORT: "-1" }, names: "--grpc-port / INFERGRID_GRPC_PORT" },
    { service: "predictor", env: { INFERGRID_LOG_LEVEL: "loud" }, names: "--log-level / INFERGRID_LOG_LEVEL" },
  ] as const;

  for (const c of cases) {
    it(`${c.service} refuses a bad value and names it`, () => {
      const r = spawnSync(process.execPath, [serviceEntry(c.service)], {
        env: { ...process.env, ...c.env },
        encoding: "utf8",
        timeout: 15_000,
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(c.names);
    });
  }

  // Options wrong only together are refused before anything connects: NATS is unreachable here, and waiting for it
  // would keep a misconfigured service hanging instead of saying what is wrong.
  const together = [
    {
      service: "backend-worker",
      env: { INFERGRID_CORES: "4", INFERGRID_MAX_CORES: "2" },
      says: "--cores (4) must not exceed --max-cores (2)",
    },
    {
      service: "global-allocator",
      env: { INFERGRID_BUDGET_PER_HOUR: "10" },
      says: "--budget-per-hour / INFERGRID_BUDGET_PER_HOUR: needs --instance-types",
    },
    {
      service: "broker",
      env: { INFERGRID_HTTP_TLS: "true" },
      says: "--http-tls: needs gRPC TLS",
    },
  ] as const;
  for (const c of together) {
    it(`${c.service} refuses options wrong together, with NATS away, and names them`, () => {
      const r = spawnSync(process.execPath, [serviceEntry(c.service)], {
        env: { ...process.env, ...c.env, INFERGRID_NATS_URL: "nats://127.0.0.1:1" },
        encoding: "utf8",
        timeout: 15_000,
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain("invalid configuration");
      expect(r.stderr).toContain(c.says);
    });
  }

  it("prints its options with --help", () => {
    const r = spawnSync(process.execPath, [serviceEntry("frontend"), "--help"], { encoding: "utf8", timeout: 15_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("--retry-gap-ms (INFERGRID_RETRY_GAP_MS)");
  });
});
