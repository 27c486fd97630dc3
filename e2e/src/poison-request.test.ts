import { control, InferenceServiceDefinition } from "@infergrid/proto";
import { isServiceError, unaryCall } from "@infergrid/runtime";
import { eventually } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AssignedCluster, startAssignedCluster } from "./assigned-cluster.js";
import { LoadDriver } from "./load-driver.js";

/**
 * A poison request: one that takes far longer than its service's attempt allowance on any backend (here 1,000
 * rows of an emulated model that takes 5 ms a row: 5 s, against an allowance of 1 s), sent among steady light
 * load through a real broker and frontend to four real backends.
 * - A model with a Themis profile: its backends know l(b, c), and refuse the request unrun at once
 *   (themis in-time.ts); it ends DEADLINE_EXCEEDED in milliseconds, and no backend is tied up.
 * - A model whose backends cannot tell (a profile measured per batch size, Kairos's, which the backend does not
 *   judge requests by): it ends DEADLINE_EXCEEDED after it timed out on two backends.
 * Before either, it went from backend to backend until its own deadline (10 s here, one attempt a second), each
 * one tied up for 5 s and suspected by the frontend: a client's single request held the service's backends for
 * its whole deadline, and ended in it.
 */
const RT_MAX_MS = 200;
const RATE = 20;

const THEMIS_MODEL = {
  kind: control.ModelKind.MODEL_KIND_EMULATED,
  profile: { shape: 0, locMs: 5, scaleMs: 0 },
  coldStartMs: 50,
  // l(b, c) with 5 ms a row and nothing else: a request of b rows takes 5b ms.
  themis: { gamma: 0, eps: 0, delta: 5, eta: 0, spread: 0 },
};
const MEASURED_MODEL = {
  kind: control.ModelKind.MODEL_KIND_EMULATED,
  profile: { shape: 0, locMs: 5, scaleMs: 0 },
  coldStartMs: 50,
  // The backends' instance type (cpu-1, the default), measured at 5 ms a row.
  instanceProfiles: [
    {
      instanceType: "cpu-1",
      points: [
        { batch: 1, meanMs: 5, p99Ms: 5 },
        { batch: 1000, meanMs: 5000, p99Ms: 5000 },
      ],
    },
  ],
};

describe.each([
  [
    "a Themis profile: refused unrun",
    THEMIS_MODEL,
    /^service svc: not run: 2 backends could not finish it within its attempt allowance \(the last: its 1000 rows take about 5000 ms/,
    1_000,
    0,
  ],
  ["a profile its backends do not judge by: timed out on two backends", MEASURED_MODEL, /timed out on 2 backends/, 4_000, 2],
] as const)("a poison request among steady load, %s (real processes)", (_name, model, ending, endsWithinMs, collateral) => {
  let c: AssignedCluster | undefined;
  let driver: LoadDriver | undefined;

  beforeAll(async () => {
    c = await startAssignedCluster({ backends: 4, frontendId: "f0" });
    const { writer, watch } = c;
    // Four backends, all in the list: every backend is in reach of every request.
    await writer.assign(
      {
        name: "svc",
        model,
        sla: { latencyThresholdMs: RT_MAX_MS, percentile: 99, burstFactor: 2 },
        minBackends: 4,
        initialBackends: 4,
      },
      c.backends,
      4,
    );
    await eventually("svc warm on every backend", () => (watch.warmBackends("svc").length === 4 ? true : undefined), 20_000);
    driver = new LoadDriver(c.client, () => ({ service: "svc", inputs: { x: { dims: [1, 1], data: [1] } } }), RATE, 5_000).start();
  }, 120_000);

  afterAll(async () => {
    await c?.stop(driver);
  }, 30_000);

  it("ends DEADLINE_EXCEEDED, and the other requests are served meanwhile", async () => {
    if (!c || !driver) throw new Error("the cluster did not start");
    const d = driver;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const sentAt = Date.now();
    const poison = await unaryCall(
      c.client,
      InferenceServiceDefinition.Infer,
      { service: "svc", inputs: { x: { dims: [1000, 1], data: new Array(1000).fill(1) } } },
      { deadline: sentAt + 10_000 },
    ).then(
      () => ({ code: 0, details: "answered" }),
      (err: unknown) => (isServiceError(err) ? { code: err.code, details: err.details } : { code: -1, details: String(err) }),
    );
    const endedAfter = Date.now() - sentAt;
    // Until the two backends it tied up are free again and no longer suspected.
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    await d.stop();
    const others = d.outcomes.filter((o) => o.sentAt >= sentAt);
    const failed = others.filter((o) => !o.ok);
    const retried = c.frontend.logs
      .filter((l) => l.msg === "backend call failed; retrying elsewhere")
      .map((l) => `${String(l.backend)} ${String(l.code)} ${String(l.details)} (${String(l.requestId).slice(0, 8)})`);
    console.log(
      `poison request: code ${poison.code} after ${endedAfter} ms (${poison.details}); ` +
        `${others.length - failed.length}/${others.length} other requests ok since, failures ${JSON.stringify(d.failureCodes())}; ` +
        `the frontend's failed calls: ${JSON.stringify(retried)}`,
    );
    expect(poison.code).toBe(4); // DEADLINE_EXCEEDED
    expect(poison.details).toMatch(ending);
    expect(endedAfter).toBeLessThan(endsWithinMs);
    expect(others.length).toBeGreaterThan(RATE * 7);
    // Where the poison ran (the second case), a request admitted behind it on a batching backend waits out its
    // allowance there too, and one that followed it to its second backend as well ends as it does (1 request in 4
    // of 8 runs before the first case's refusal existed).
    expect(failed.length).toBeLessThanOrEqual(collateral);
  }, 60_000);
});
