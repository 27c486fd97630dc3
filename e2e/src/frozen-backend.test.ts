import { AllocatorAdminDefinition } from "@infergrid/proto";
import { unaryCall } from "@infergrid/runtime";
import type { ServiceProcess } from "@infergrid/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { LoadDriver } from "./load-driver.js";
import { emulatedSpec, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * A backend frozen (SIGSTOP) while requests are on their way to it, then thawed after their callers moved on:
 * on real processes (NATS, allocator, two backends, a frontend, the broker). Every request must end once,
 * answered by the other backend, and the thawed backend must run none of the calls it reads late.
 */
let cluster: TestCluster | undefined;

afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function executes(b: ServiceProcess): Promise<Map<string, number>> {
  const byStatus = new Map<string, number>();
  const text = await (await fetch(`http://${b.ready.metricsAddress}/metrics`)).text();
  for (const line of text.split("\n")) {
    if (!line.startsWith("infergrid_backend_requests_total{")) continue;
    const status = /status="([^"]+)"/.exec(line)?.[1] ?? "";
    byStatus.set(status, Number(line.split(" ").pop()));
  }
  return byStatus;
}

describe("a backend frozen and thawed", () => {
  it("runs none of the calls whose callers moved on while it was frozen; every request is answered once", async () => {
    const c = await startCluster({ backends: 2, frontends: 1 });
    cluster = c;
    await registerService(c, emulatedSpec("svc", { locMs: 20, scaleMs: 2, shape: 0.1, initialBackends: 2, maxBackends: 2, rtMaxMs: 300 }));
    await waitUntilServing(c, "svc");
    const entry = await unaryCall(c.adminClient, AllocatorAdminDefinition.GetService, { name: "svc" }, { deadline: Date.now() + 5000 });
    const victim = c.backends.find((b) => b.ready.id === entry.backends?.[0]?.backendId);
    expect(victim, "the first entry of svc's list").toBeDefined();
    if (!victim) return;
    const before = await executes(victim);

    victim.pause();
    const driver = new LoadDriver(c.brokerClient, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), 10, 5_000).start();
    await new Promise((r) => setTimeout(r, 3_000));
    await driver.stop();
    // Every call to the frozen backend has been given up by now (1 s attempt timeout) and answered elsewhere.
    victim.resume();
    await new Promise((r) => setTimeout(r, 2_000));
    const after = await executes(victim);

    expect(driver.outcomes.length).toBe(driver.sentCount);
    const failed = driver.outcomes.filter((o) => !o.ok);
    expect(failed.map((o) => o.code)).toEqual([]);
    const ran = (after.get("EXECUTE_STATUS_OK") ?? 0) - (before.get("EXECUTE_STATUS_OK") ?? 0);
    const late = (after.get("LATE_NOT_RUN") ?? 0) - (before.get("LATE_NOT_RUN") ?? 0);
    const retried = driver.outcomes.filter((o) => o.attempts > 1).length;
    console.info(
      `frozen backend: ${driver.outcomes.length} requests, all answered, ${retried} after more than one attempt; ` +
        `thawed, it ran ${ran} and refused ${late} as late`,
    );
    expect(retried, "some requests met the frozen backend first").toBeGreaterThan(0);
    expect(ran, "calls the thawed backend ran though their callers had moved on").toBe(0);
  }, 90_000);
});
