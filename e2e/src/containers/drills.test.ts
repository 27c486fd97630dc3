import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "@infergrid/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LoadDriver } from "../load-driver.js";
import { emulatedSpec } from "../process-cluster.js";
import { ContainerCluster } from "./container-cluster.js";
import { LoadWatch } from "./watch.js";

/**
 * Failure-injection drills on the system in containers: 3 frontends, 10 backends, allocator,
 * predictor, broker and NATS, each in its own container. Each drill runs steady open-loop load
 * through the broker, injects one fault (SIGKILL, SIGSTOP, a cut from the network), restores what
 * Kubernetes would restore (a restarted container), and asserts in numbers:
 *  - every request sent was answered or explicitly failed (none lost; the driver counts each
 *    request's single outcome, so none can be answered twice);
 *  - the time from the fault until SLA compliance (99% of a 40-request window within RT_max) is
 *    back and stays;
 *  - the state that must converge does: the frontends' n_F, the ordered lists, the pool.
 * The drill table goes to docs/drills.md.
 */
const SERVICE = "svc";
const RT_MAX_MS = 400;
const RATE = 20;
const BACKENDS = 10;
const T_SETUP_MS = 2000;

let cluster: ContainerCluster;
let watch: LoadWatch;

interface Row {
  fault: string;
  sent: number;
  answered: number;
  failed: number;
  lost: number;
  recoveryMs: number | undefined;
  converged: string;
}
const rows: Row[] = [];

const request = () => ({ service: SERVICE, inputs: { x: { dims: [1], data: [1] } } });

async function waitUntil<T>(
  what: string | (() => string),
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out waiting for ${typeof what === "string" ? what : what()}${last instanceof Error ? `: ${last.message}` : ""}`,
      );
    await sleep(200);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function svcList(): Promise<string[]> {
  const state = await cluster.clusterState();
  return (state.services ?? []).find((s) => s.spec?.name === SERVICE)?.backends?.map((b) => b.backendId ?? "") ?? [];
}

async function poolIds(): Promise<string[]> {
  return ((await cluster.clusterState()).backends ?? []).map((b) => b.backendId ?? "").sort();
}

/** Waits until every named live frontend reports n_F = expected in a report made after `since`. */
async function frontendsAgree(live: string[], expected: number, since: number, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  // A failure says whether each frontend got traffic, and what the broker and the frontends warned of.
  const warnings = (name: string) =>
    cluster
      .node(name)
      .logs.filter((l) => /"level":(40|50|60)/.test(l) || /joined the rotation|draining/.test(l))
      .slice(-8)
      .join("\n");
  await waitUntil(
    () =>
      `frontends ${live.join(",")} to count ${expected} (last reports: ${watch.describe(SERVICE, live)})\n` +
      ["broker", ...live].map((n) => `--- ${n} warnings:\n${warnings(n)}`).join("\n"),
    () => {
      const est = watch.estimates(SERVICE, live, since);
      return est.size === live.length && [...est.values()].every((n) => n === expected);
    },
    timeoutMs,
  );
  return Date.now() - t0;
}

/** What the frontends logged of failed backend calls since `since`, by backend and reason (why a miss was slow). */
function failedBackendCalls(since: number): string {
  const counts = new Map<string, number>();
  for (const name of cluster.frontendNames()) {
    for (const line of cluster.node(name).logs) {
      if (!line.includes("retrying elsewhere")) continue;
      try {
        const l = JSON.parse(line) as { time?: string; backend?: string; code?: string; details?: string };
        if (Date.parse(l.time ?? "") < since) continue;
        const key = `${l.backend} ${l.code}: ${(l.details ?? "").slice(0, 80)}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      } catch {
        // Not a JSON line: not one of the frontend's own.
      }
    }
  }
  return counts.size === 0 ? "none" : [...counts].map(([k, n]) => `${n}x ${k}`).join("; ");
}

/**
 * Runs one drill: load for `leadMs`, the fault, `during` (convergence checks, restoration), then
 * load until compliance has held for a while; records and checks the row.
 */
async function drill(fault: string, inject: () => Promise<void>, during: () => Promise<string>, maxRecoveryMs: number): Promise<Row> {
  const driver = new LoadDriver(cluster.brokerClient, request, RATE, 5000).start();
  await sleep(3000);
  const faultAt = Date.now();
  let converged: string;
  try {
    await inject();
    converged = await during();
    // Keep the load on until compliance holds for a few full windows after everything is restored.
    await sleep(8000);
  } finally {
    // A drill that fails must not leave its load running into the next one.
    await driver.stop();
  }
  const c = driver.counts();
  const recoveredAt = driver.recoveredAt(faultAt, RT_MAX_MS, 0.99, 40);
  const row: Row = { fault, ...c, recoveryMs: recoveredAt === undefined ? undefined : Math.max(0, recoveredAt - faultAt), converged };
  rows.push(row);
  // The last misses say what kept compliance from holding (when, how slow, on which backend).
  const misses = driver
    .misses(faultAt, RT_MAX_MS)
    .slice(-10)
    .map((o) => `+${o.sentAt - faultAt} ms: ${o.ok ? `${o.doneAt - o.sentAt} ms on ${o.backendId}` : o.code} (${o.attempts} attempts)`);
  console.log(
    `drill "${fault}": ${JSON.stringify(row)}; failures by code ${JSON.stringify(driver.failureCodes())}; ` +
      `last misses after the fault: ${misses.join(", ") || "none"}; load stopped ${Date.now() - faultAt} ms after it; ` +
      `frontends' failed backend calls after the fault: ${failedBackendCalls(faultAt)}`,
  );
  expect(row.lost).toBe(0);
  expect(row.answered + row.failed).toBe(row.sent);
  expect(row.recoveryMs, "SLA compliance recovered").toBeDefined();
  expect(row.recoveryMs ?? Number.POSITIVE_INFINITY).toBeLessThan(maxRecoveryMs);
  return row;
}

beforeAll(async () => {
  const t0 = Date.now();
  cluster = await ContainerCluster.start({
    frontends: 3,
    backends: BACKENDS,
    predictor: true,
    backendEnv: { INFERGRID_IDLE_TIMEOUT_MS: "600000", INFERGRID_T_SETUP_MS: String(T_SETUP_MS) },
    frontendEnv: {
      INFERGRID_T_SETUP_MS: String(T_SETUP_MS),
      INFERGRID_ATTEMPT_TIMEOUT_MS: "600",
      INFERGRID_BACKEND_FAIL_COOLDOWN_MS: "3000",
      INFERGRID_SCALE_IN_COOLDOWN_MS: "600000",
    },
  });
  watch = await LoadWatch.open(cluster.natsFromHost("drill-load-watch"));
  await cluster.registerService(
    emulatedSpec(SERVICE, { locMs: 10, scaleMs: 10, shape: 0.3, coldStartMs: 200, rtMaxMs: RT_MAX_MS, maxBackends: 6, initialBackends: 4 }),
  );
  await waitUntil("svc to serve", async () => (await cluster.infer(request(), 2000)).backendId || undefined, 60_000);
  console.log(`drill cluster (17 containers) serving after ${Date.now() - t0} ms`);
}, 300_000);

afterAll(async () => {
  if (rows.length > 0) writeTable();
  await watch?.close();
  await cluster?.stop();
});

function writeTable(): void {
  const lines = [
    "# Failure-injection drills (containers)",
    "",
    "Written by `npm run test:e2e` (e2e/src/containers/drills.test.ts) on its last run. The system runs as",
    `containers (podman, images from \`npm run images\`): NATS, allocator, predictor, broker, 3 frontends, ${BACKENDS} backends.`,
    `Steady open-loop load of ${RATE} req/s through the broker; SLA: 99% of requests within ${RT_MAX_MS} ms.`,
    "Recovery = time from the fault until SLA compliance (over a sliding window of 40 requests) is back for good.",
    "Lost = sent - answered - failed (a request with neither an answer nor an explicit error).",
    "",
    "| fault | sent | answered | failed | lost | recovery (ms) | converged |",
    "|---|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) => `| ${r.fault} | ${r.sent} | ${r.answered} | ${r.failed} | ${r.lost} | ${r.recoveryMs ?? "not recovered"} | ${r.converged} |`,
    ),
    "",
    `Run at ${new Date().toISOString()}.`,
    "",
  ];
  mkdirSync(join(repoRoot, "docs"), { recursive: true });
  writeFileSync(join(repoRoot, "docs", "drills.md"), lines.join("\n"));
}

describe.sequential("failure drills (containers)", () => {
  it("kill a frontend: the others' n_F falls to 2, the broker moves its load; with a replacement, n_F is 3 again", async () => {
    const live = cluster.frontendNames();
    // n_F is learned from traffic: agree on 3 under load first.
    const warm = new LoadDriver(cluster.brokerClient, request, RATE, 5000).start();
    await frontendsAgree(live, 3, Date.now(), 20_000);
    await warm.stop();
    let killedAt = 0;
    await drill(
      "kill a frontend (SIGKILL; a replacement pod starts)",
      async () => {
        killedAt = Date.now();
        await cluster.kill("frontend-2");
      },
      async () => {
        const down = await frontendsAgree(["frontend-0", "frontend-1"], 2, killedAt, 4 * T_SETUP_MS + 4000);
        // A Deployment replaces the dead pod with a new one (new name and address).
        const restartAt = Date.now();
        await cluster.remove("frontend-2");
        await cluster.startFrontend(3);
        const up = await frontendsAgree(cluster.frontendNames(), 3, restartAt, 4 * T_SETUP_MS + 4000);
        return `n_F 3 -> 2 in ${down} ms after the kill; -> 3 in ${up} ms after the replacement started`;
      },
      20_000,
    );
  });

  it("kill one backend, then half of them: the pool and the ordered list drop them; restarted, they rejoin", async () => {
    const before = await svcList();
    expect(before.length).toBeGreaterThanOrEqual(4);
    const victim = before[0]!;
    await drill(
      "kill 1 backend (head of the list)",
      () => cluster.kill(victim),
      async () => {
        const t0 = Date.now();
        await waitUntil(
          "the killed backend to leave the pool and the list",
          async () => {
            const [pool, list] = [await poolIds(), await svcList()];
            return !pool.includes(victim) && !list.includes(victim) && list.length >= 1;
          },
          15_000,
        );
        const gone = Date.now() - t0;
        await cluster.restart(victim);
        await waitUntil("the backend to rejoin the pool", async () => (await poolIds()).includes(victim), 20_000);
        return `left pool+list in ${gone} ms; rejoined pool after restart; pool ${(await poolIds()).length}/${BACKENDS}`;
      },
      15_000,
    );

    const list = await svcList();
    const pool = await poolIds();
    // Half of the pool, taking the first half of the service's list with it.
    const victims = [...new Set([...list.slice(0, Math.ceil(list.length / 2)), ...pool])].slice(0, BACKENDS / 2);
    await drill(
      `kill half the backends (${victims.length}, incl. list head)`,
      async () => {
        await Promise.all(victims.map((v) => cluster.kill(v)));
      },
      async () => {
        const t0 = Date.now();
        await waitUntil(
          "the pool to shrink to the survivors and the list to hold only live backends",
          async () => {
            const [p, l] = [await poolIds(), await svcList()];
            return p.length === BACKENDS - victims.length && l.length >= 1 && l.every((b) => !victims.includes(b));
          },
          20_000,
        );
        const gone = Date.now() - t0;
        await Promise.all(victims.map((v) => cluster.restart(v)));
        await waitUntil("the pool to be whole again", async () => (await poolIds()).length === BACKENDS, 30_000);
        return `pool ${BACKENDS} -> ${BACKENDS - victims.length}, list only live, in ${gone} ms; pool ${BACKENDS} again after restarts`;
      },
      30_000,
    );
  });

  it("kill the global-allocator: requests go on over the last lists; restarted, it restores the same ordered lists", async () => {
    const before = await svcList();
    await drill(
      "kill the global-allocator",
      () => cluster.kill("allocator"),
      async () => {
        await sleep(3000);
        await cluster.restart("allocator");
        const t0 = Date.now();
        const after = await waitUntil(
          "the allocator to serve the same list",
          async () => {
            const l = await svcList();
            return l.length > 0 ? l : undefined;
          },
          20_000,
        );
        expect(after.slice(0, before.length)).toEqual(before);
        return `list restored in ${Date.now() - t0} ms after restart, same order (${after.length} entries)`;
      },
      5_000,
    );
  });

  it("kill the predictor: requests are untouched; restarted, it is a member again", async () => {
    await drill(
      "kill the predictor",
      () => cluster.kill("predictor"),
      async () => {
        await sleep(2000);
        const restartAt = Date.now();
        await cluster.restart("predictor");
        await waitUntil(
          "the predictor to heartbeat again",
          async () => {
            const m = ((await cluster.clusterState()).members ?? []).find((x) => x.id === "predictor");
            return m !== undefined && Number(m.lastSeenUnixMs) > restartAt;
          },
          20_000,
        );
        return `member again ${Date.now() - restartAt} ms after restart`;
      },
      5_000,
    );
  });

  it("kill NATS and bring it back: requests go on over gRPC; afterwards every member heartbeats and the lists are intact", async () => {
    const before = await svcList();
    await drill(
      "kill NATS (SIGKILL, restart after 5 s)",
      () => cluster.kill("nats"),
      async () => {
        await sleep(5000);
        const restartAt = Date.now();
        await cluster.restart("nats");
        const members = ["broker", ...cluster.frontendNames(), "predictor"];
        await waitUntil(
          "every member to heartbeat through the new NATS",
          async () => {
            const state = await cluster.clusterState();
            const fresh = (state.members ?? []).filter((m) => Number(m.lastSeenUnixMs) > restartAt).map((m) => m.id);
            const pool = (state.backends ?? []).filter((b) => Number(b.lastSeenUnixMs) > restartAt);
            return members.every((m) => fresh.includes(m)) && pool.length === BACKENDS;
          },
          30_000,
        );
        const back = Date.now() - restartAt;
        expect((await svcList()).slice(0, before.length)).toEqual(before);
        await frontendsAgree(cluster.frontendNames(), 3, restartAt, 20_000);
        return `all members + ${BACKENDS} backends heartbeating ${back} ms after restart; list intact; n_F 3`;
      },
      5_000,
    );
  });

  it("cut a frontend off the network and heal it: the broker fails over; the others count 2, then 3 again", async () => {
    let cutAt = 0;
    await drill(
      "partition a frontend (network cut, heal after n_F converged)",
      async () => {
        cutAt = Date.now();
        await cluster.cut("frontend-1");
      },
      async () => {
        const down = await frontendsAgree(
          cluster.frontendNames().filter((f) => f !== "frontend-1"),
          2,
          cutAt,
          4 * T_SETUP_MS + 4000,
        );
        const healAt = Date.now();
        await cluster.heal("frontend-1");
        const up = await frontendsAgree(cluster.frontendNames(), 3, healAt, 4 * T_SETUP_MS + 8000);
        return `n_F 3 -> 2 in ${down} ms after the cut; -> 3 in ${up} ms after healing`;
      },
      15_000,
    );
  });

  it("a backend that hangs (SIGSTOP, no reply): its requests are retried elsewhere; it leaves the list; thawed, it rejoins", async () => {
    const list = await svcList();
    const victim = list[0]!;
    await drill(
      `a backend hangs (SIGSTOP ${victim}, SIGCONT later)`,
      () => cluster.freeze(victim),
      async () => {
        const t0 = Date.now();
        await waitUntil("the hung backend to leave the list", async () => !(await svcList()).includes(victim), 15_000);
        const gone = Date.now() - t0;
        await cluster.thaw(victim);
        await waitUntil("the thawed backend to rejoin the pool", async () => (await poolIds()).includes(victim), 20_000);
        return `left the list in ${gone} ms (heartbeat ttl); back in the pool after SIGCONT`;
      },
      15_000,
    );
  });
});
