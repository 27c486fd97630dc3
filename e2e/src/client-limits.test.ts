import { retryAfterMs } from "@infergrid/dataplane";
import { grpc, isServiceError } from "@infergrid/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatedSpec, infer, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * The broker's per-client rate limit on real processes (NATS, allocator, a backend, a frontend, the broker):
 * a client over its rate is refused before any work is done, told when to come back, over gRPC and HTTP alike.
 */
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster({
    backends: 1,
    frontends: 1,
    brokerEnv: { INFERGRID_CLIENT_RATE_LIMIT: "5", INFERGRID_CLIENT_BURST: "5" },
  });
  await registerService(cluster, emulatedSpec("svc", { initialBackends: 1 }));
  await waitUntilServing(cluster, "svc");
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("per-client rate limit at the broker", () => {
  it("admits a burst, refuses the rest RESOURCE_EXHAUSTED / 429 with when to retry, and admits again later", async () => {
    await pause(1_200); // the bucket refills after the start-up requests
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, () =>
        infer(cluster, { service: "svc" }).then(
          () => ({ code: grpc.status.OK, retry: undefined as number | undefined }),
          (err: unknown) => {
            if (!isServiceError(err)) throw err;
            return { code: err.code, retry: retryAfterMs(err.metadata) };
          },
        ),
      ),
    );
    const ok = outcomes.filter((o) => o.code === grpc.status.OK).length;
    const limited = outcomes.filter((o) => o.code === grpc.status.RESOURCE_EXHAUSTED);
    expect(ok + limited.length).toBe(30);
    expect(ok).toBeGreaterThanOrEqual(5);
    expect(ok).toBeLessThanOrEqual(7); // the burst, and what the rate refilled while the 30 went out
    expect(limited.every((o) => o.retry !== undefined && o.retry > 0 && o.retry <= 200)).toBe(true);

    // Over HTTP too (sent one after another: at most the burst and a refill get through, whichever bucket it is).
    let http: Response | undefined;
    for (let i = 0; i < 10; i++) {
      http = await fetch(`${cluster.httpUrl}/v1/infer`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ service: "svc" }),
      });
      if (http.status !== 200) break;
    }
    if (!http) throw new Error("no HTTP answer");
    expect(http.status).toBe(429);
    expect(Number(http.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await http.json()) as { error: { code: string } }).error.code).toBe("RESOURCE_EXHAUSTED");

    await pause(1_200);
    expect((await infer(cluster, { service: "svc" })).backendId).toBeTruthy();
  });
});
