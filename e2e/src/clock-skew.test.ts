import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually, WALL_CLOCK_STEPPED, wallClockStepArgs } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AssignedCluster, startAssignedCluster } from "./assigned-cluster.js";
import { LoadDriver } from "./load-driver.js";
import { emulatedSpec } from "./process-cluster.js";

/**
 * One node's wall clock an hour off the others' (a node whose NTP stopped, a VM resumed with a stale clock), under
 * steady load on real processes: the frontend's node alone, or the node of two of the four backends alone. A hop's
 * deadline goes to the next hop twice: as the gRPC timeout (relative, read from when the call arrives) and stamped
 * in the message on the sender's clock, which lets a receiver that was frozen tell a call its caller has given up
 * on (frozen-backend.test.ts). A receiver reads the stamp against the lag it has learned of that sender, so a node
 * whose clock is off serves as the others do.
 */
const RATE = 40;
const RT_MAX_MS = 300;
const HOUR = 3_600_000;

describe.each([
  ["the frontend's node", ["frontend"]],
  ["two backends' node", ["b0", "b1"]],
])("%s an hour ahead of the others' (real processes)", (_which, stepped) => {
  const dir = mkdtempSync(join(tmpdir(), "ig-clock-skew-"));
  let c: AssignedCluster | undefined;
  let driver: LoadDriver | undefined;

  beforeAll(async () => {
    const step = wallClockStepArgs(dir, HOUR);
    c = await startAssignedCluster({
      backends: 4,
      frontendId: "frontend-0",
      frontendEnv: { INFERGRID_AUTOSCALE_MS: "250" },
      brokerEnv: { INFERGRID_FRONTEND_TTL_MS: "2000" },
      nodeArgs: (name) => (stepped.includes(name) ? step : undefined),
    });
    const { writer, watch } = c;
    // Four backends, all warm and in the prefix, so that every one of them takes its share of the requests.
    await writer.assign(
      emulatedSpec("svc", { locMs: 20, scaleMs: 5, shape: 0.3, coldStartMs: 100, rtMaxMs: RT_MAX_MS, initialBackends: 4 }),
      c.backends,
      4,
    );
    await eventually("svc to serve on four backends", () => (watch.warmBackends("svc").length >= 4 ? true : undefined), 20_000);
    driver = new LoadDriver(c.client, () => ({ service: "svc", inputs: { x: { dims: [1], data: [1] } } }), RATE).start();
  }, 120_000);

  afterAll(async () => {
    await c?.stop(driver);
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it("serves every request within the SLO, on every backend, after the step as before it", async () => {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    if (!c || !driver) throw new Error("the cluster did not start");
    const d = driver;
    const targets = [c.frontend, ...c.backends].filter((p) => stepped.includes(p.name));
    for (const p of targets) process.kill(p.pid, "SIGUSR2");
    await Promise.all(targets.map((p) => p.waitForLog((l) => l.msg === WALL_CLOCK_STEPPED, 5_000)));
    const steppedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    // Answered or failed by now: the driver's requests time out after 10 s (those sent in the last 5 s are left).
    const after = d.outcomes.filter((o) => o.sentAt >= steppedAt && o.sentAt < steppedAt + 5_000);
    const ok = after.filter((o) => o.ok && o.doneAt - o.sentAt <= RT_MAX_MS);
    const served = new Map<string, number>();
    for (const o of ok) served.set(o.backendId, (served.get(o.backendId) ?? 0) + 1);
    console.log(
      `${stepped.join(", ")} an hour ahead: ${ok.length}/${after.length} requests within ${RT_MAX_MS} ms, ` +
        `failures ${JSON.stringify(d.failureCodes())}, served by ${JSON.stringify(Object.fromEntries(served))}`,
    );
    expect(after.length).toBeGreaterThan(RATE * 4);
    expect(d.failureCodes()).toEqual({});
    expect(ok.length).toBe(after.length);
    // The backends whose clocks are off serve too (before, each refused every call as read after its deadline).
    for (const id of ["b0", "b1", "b2", "b3"]) expect(served.get(id) ?? 0).toBeGreaterThan(0);
  }, 60_000);
});
