import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatedSpec, infer, registerService, startCluster, type TestCluster, waitUntilServing } from "./process-cluster.js";

/**
 * Late binding on real processes: a real nats-server, the allocator, 2 backends and 2 frontends (static
 * scaling, so both backends are in every prefix) behind the broker. A burst larger than the backends queues;
 * a refused request parks at both backends (gRPC Park), a backend that frees holds its slot for the oldest
 * parked request, and the frontend runs it there (Execute with the hold) and releases any other slot held.
 */
const SERVICE_MS = 60;
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster({ backends: 2, frontends: 2, frontendEnv: { INFERGRID_SCALING: "static" } });
  await registerService(
    cluster,
    emulatedSpec("queue", { locMs: SERVICE_MS, scaleMs: 1, shape: 0.01, maxBackends: 2, initialBackends: 2, rtMaxMs: 10_000 }),
  );
  await waitUntilServing(cluster, "queue");
  // Both backends warm (the static frontends warm the whole prefix): two requests at once are served at once.
  await Promise.all([waitUntilServing(cluster, "queue"), waitUntilServing(cluster, "queue")]);
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

async function backendCounter(name: string): Promise<Map<string, number>> {
  const byStatus = new Map<string, number>();
  for (const b of cluster.backends) {
    const text = await (await fetch(`http://${b.ready.metricsAddress}/metrics`)).text();
    for (const line of text.split("\n")) {
      if (!line.startsWith(`${name}{`)) continue;
      const status = /status="([^"]+)"/.exec(line)?.[1] ?? "";
      byStatus.set(status, (byStatus.get(status) ?? 0) + Number(line.split(" ").pop()));
    }
  }
  return byStatus;
}

describe("late binding: refused requests park and are served oldest first", () => {
  it("answers every request of a burst once, in about the order they came, with held slots doing the binding", async () => {
    const parksBefore = await backendCounter("infergrid_backend_parks_total");
    const sent = 24;
    const finished: number[] = [];
    const results = await Promise.allSettled(
      Array.from({ length: sent }, async (_, i) => {
        // Staggered so that the order of arrival is known: 24 requests of 60 ms on 2 backends queue ~700 ms.
        await new Promise((r) => setTimeout(r, i * 8));
        const res = await infer(cluster, { service: "queue" }, 20_000);
        finished.push(i);
        return res;
      }),
    );
    const failures = results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
    expect(failures).toEqual([]);
    expect(finished).toHaveLength(sent);

    // Pairs finished out of arrival order. Random probing serves the waiting requests in random order (the same
    // burst with INFERGRID_PARK_WINDOW_MS=0: 87 of 276 pairs, 32 %); parked
    // ones go oldest first, so mostly near-ties (requests sent 8 ms apart through different frontends) swap.
    let inverted = 0;
    let pairs = 0;
    for (let a = 0; a < sent; a++) {
      for (let b = a + 1; b < sent; b++) {
        pairs += 1;
        if ((finished[a] as number) > (finished[b] as number)) inverted += 1;
      }
    }
    const parks = await backendCounter("infergrid_backend_parks_total");
    const held = (parks.get("PARK_STATUS_HELD") ?? 0) - (parksBefore.get("PARK_STATUS_HELD") ?? 0);
    console.log(`burst of ${sent}: ${inverted}/${pairs} pairs out of order; parks by status ${JSON.stringify(Object.fromEntries(parks))}`);
    // Measured on a quiet machine: 18-26 of 276 pairs, on this code and on 8325df2 alike (a request is out of the
    // backends' lots for a few hops each time a park round times out, and a slot freed then goes to a younger
    // one). Probing gives 87; the bound keeps parking at under half of that.
    expect(inverted / pairs).toBeLessThan(0.15);
    // Every request beyond the two served at once waited for a slot, and got it through a park.
    expect(held).toBeGreaterThanOrEqual(sent - 4);
  });
});
