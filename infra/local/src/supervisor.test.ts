import { setTimeout as sleep } from "node:timers/promises";
import type { RestartBackoffOptions } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import type { ChildHandle, ExitStatus } from "./processes.js";
import { describeEvent, pinnedPortEnv, type SupervisionEvent, Supervisor, type SupervisorOptions } from "./supervisor.js";

/**
 * The supervisor's shell over stand-in processes (no real ones: the CLI's integration test kills real
 * services): it restarts after the policy's wait, keeps counting, and starts nothing once the cluster stops.
 */

interface Fake extends ChildHandle {
  die(status: ExitStatus): void;
  stops: number;
}

let nextPid = 1000;

function fake(name: string, ready: Record<string, string> = {}): Fake {
  let status: ExitStatus | undefined;
  let resolve: () => void = () => {};
  const exited = new Promise<void>((r) => {
    resolve = r;
  });
  const end = (s: ExitStatus) => {
    if (status) return;
    status = s;
    resolve();
  };
  const f: Fake = {
    name,
    pid: nextPid++,
    logPath: `/tmp/${name}.log`,
    ready,
    isRunning: () => status === undefined,
    exitStatus: () => status,
    exited,
    stops: 0,
    // As the real handle: a stop of a process that has ended does nothing.
    stop: async () => {
      if (status) return;
      f.stops++;
      end({ code: 0, signal: null });
      await exited;
    },
    kill: () => end({ code: null, signal: "SIGKILL" }),
    die: end,
  };
  return f;
}

const quick: RestartBackoffOptions = { initialMs: 20, factor: 2, maxMs: 80, resetAfterMs: 10_000 };

function setup(options: Partial<SupervisorOptions> = {}) {
  const events: SupervisionEvent[] = [];
  const leftovers: number[] = [];
  const supervisor = new Supervisor({
    backoff: quick,
    restart: true,
    onEvent: (e) => events.push(e),
    killLeftovers: (pid) => leftovers.push(pid),
    ...options,
  });
  return { supervisor, events, leftovers };
}

async function until(what: string, check: () => boolean, timeoutMs = 2_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe("Supervisor", () => {
  it("starts a process that died again after the wait, with a new pid under the same name, and counts it", async () => {
    const { supervisor, events, leftovers } = setup();
    const first = fake("backend-00", { grpcAddress: "127.0.0.1:5000" });
    const relaunched: Fake[] = [];
    const slot = supervisor.supervise(first, async (previous) => {
      const f = fake(previous.name, { grpcAddress: "127.0.0.1:6000" });
      relaunched.push(f);
      return f;
    });
    const diedAt = Date.now();
    first.die({ code: null, signal: "SIGKILL" });
    await until("the restart", () => slot.restarts === 1 && events.length === 2);
    expect(Date.now() - diedAt).toBeGreaterThanOrEqual(quick.initialMs - 1);
    expect(leftovers).toEqual([first.pid]);
    expect(events[0]).toMatchObject({
      kind: "exited",
      name: "backend-00",
      pid: first.pid,
      status: { code: null, signal: "SIGKILL" },
      restart: { number: 1, inMs: 20 },
    });
    expect(events[1]).toEqual({ kind: "restarted", name: "backend-00", pid: relaunched[0]?.pid, previousPid: first.pid, restarts: 1 });
    // The slot is the new process now: its pid, its ready line, its state.
    expect(slot.pid).toBe(relaunched[0]?.pid);
    expect(slot.pids).toEqual([first.pid, relaunched[0]?.pid]);
    expect(slot.ready.grpcAddress).toBe("127.0.0.1:6000");
    expect(slot.isRunning()).toBe(true);
    expect(supervisor.restarts()).toEqual({ total: 1, byProcess: { "backend-00": 1 }, notRestarted: [] });
    await slot.stop(1_000);
    expect(relaunched[0]?.stops).toBe(1);
    await slot.exited;
  });

  it("waits longer each time it keeps dying, up to the cap", async () => {
    const { supervisor, events } = setup();
    let current = fake("frontend-0");
    const slot = supervisor.supervise(current, async (previous) => {
      current = fake(previous.name);
      return current;
    });
    for (let i = 1; i <= 4; i++) {
      current.die({ code: 1, signal: null });
      await until(`restart ${i}`, () => slot.restarts === i);
    }
    const waits = events.flatMap((e) => (e.kind === "exited" ? [e.restart?.inMs] : []));
    expect(waits).toEqual([20, 40, 80, 80]);
    expect(supervisor.restarts().byProcess).toEqual({ "frontend-0": 4 });
    await slot.stop(1_000);
  });

  it("starts nothing once stopping, even when the process died and its wait is under way", async () => {
    const { supervisor, events } = setup({ backoff: { ...quick, initialMs: 200, maxMs: 200 } });
    const first = fake("broker");
    let relaunches = 0;
    const slot = supervisor.supervise(first, async (previous) => {
      relaunches++;
      return fake(previous.name);
    });
    first.die({ code: null, signal: "SIGSEGV" });
    await until("the exit to be reported", () => events.length === 1);
    supervisor.stopRestarts();
    await sleep(300);
    expect(relaunches).toBe(0);
    expect(slot.restarts).toBe(0);
    // A stop afterwards ends at once: nothing runs.
    await slot.stop(1_000);
    await slot.exited;
    expect(events.map((e) => e.kind)).toEqual(["exited"]);
  });

  it("abandons a start under way when the cluster stops, and waits until its process is gone", async () => {
    const { supervisor, events } = setup();
    const first = fake("frontend-1");
    let abandoned = false;
    const slot = supervisor.supervise(
      first,
      (previous, signal) =>
        new Promise<Fake>((resolve, reject) => {
          // Comes up only after 5 s: the stop must not wait for it.
          const t = setTimeout(() => resolve(fake(previous.name)), 5_000);
          signal.addEventListener("abort", () => {
            clearTimeout(t);
            abandoned = true;
            reject(new Error("start abandoned"));
          });
        }),
    );
    first.die({ code: 1, signal: null });
    await until("the start to be under way", () => slot.restarts === 1);
    const t0 = Date.now();
    await slot.stop(1_000);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(abandoned).toBe(true);
    await slot.exited;
    // The abandoned start is no failure to report, and nothing is scheduled after it.
    expect(events.map((e) => e.kind)).toEqual(["exited"]);
    await sleep(100);
    expect(events.length).toBe(1);
  });

  it("stops a process that came up although the cluster was stopping (a start that ignores the signal)", async () => {
    const { supervisor, events } = setup();
    const first = fake("nats-server");
    let late: Fake | undefined;
    const slot = supervisor.supervise(first, async (previous) => {
      await sleep(100);
      late = fake(previous.name);
      return late;
    });
    first.die({ code: null, signal: "SIGKILL" });
    await until("the start to be under way", () => slot.restarts === 1);
    await slot.stop(1_000);
    expect(late?.isRunning()).toBe(false);
    expect(late?.stops).toBe(1);
    expect(events.map((e) => e.kind)).toEqual(["exited"]);
  });

  it("reports a start that failed and tries again after a longer wait", async () => {
    const { supervisor, events } = setup();
    const first = fake("global-allocator");
    let tries = 0;
    const slot = supervisor.supervise(first, async (previous) => {
      tries++;
      if (tries === 1) throw new Error("global-allocator exited (code 1) before it was ready; log:\nline 1\nline 2");
      return fake(previous.name);
    });
    first.die({ code: 1, signal: null });
    await until("the second try", () => events.some((e) => e.kind === "restarted"));
    expect(events.map((e) => e.kind)).toEqual(["exited", "restart-failed", "restarted"]);
    expect(events[1]).toEqual({
      kind: "restart-failed",
      name: "global-allocator",
      reason: "global-allocator exited (code 1) before it was ready; log:",
      restart: { number: 2, inMs: 40 },
    });
    expect(slot.restarts).toBe(2);
    await slot.stop(1_000);
  });

  it("with restarts off (--no-restart), reports the death and leaves the process down", async () => {
    const { supervisor, events } = setup({ restart: false });
    const first = fake("backend-03");
    let relaunches = 0;
    const slot = supervisor.supervise(first, async (previous) => {
      relaunches++;
      return fake(previous.name);
    });
    first.die({ code: null, signal: "SIGKILL" });
    await until("the exit to be reported", () => events.length === 1);
    await sleep(100);
    expect(relaunches).toBe(0);
    expect(events[0]).toMatchObject({ kind: "exited", name: "backend-03", restart: undefined });
    expect(supervisor.restarts()).toEqual({ total: 0, byProcess: {}, notRestarted: ["backend-03"] });
    await slot.stop(1_000);
  });

  it("reports nothing about the exits the stop itself causes", async () => {
    const { supervisor, events, leftovers } = setup();
    const slots = ["a", "b"].map((n) => supervisor.supervise(fake(n), async (p) => fake(p.name)));
    supervisor.stopRestarts();
    await Promise.all(slots.map((s) => s.stop(1_000)));
    await sleep(50);
    expect(events).toEqual([]);
    expect(supervisor.restarts().total).toBe(0);
    // Stopped processes' groups are ended as well (as after a crash).
    expect(leftovers.length).toBe(2);
  });
});

describe("pinnedPortEnv", () => {
  it("keeps the first start's gRPC and HTTP ports", () => {
    expect(pinnedPortEnv({ id: "broker", grpcAddress: "127.0.0.1:40123", httpAddress: "127.0.0.1:40124", metricsAddress: "x:1" })).toEqual({
      INFERGRID_GRPC_PORT: "40123",
      INFERGRID_HTTP_PORT: "40124",
    });
    expect(pinnedPortEnv({ httpAddress: "127.0.0.1:8090" })).toEqual({ INFERGRID_HTTP_PORT: "8090" });
    expect(pinnedPortEnv({ grpcAddress: "garbled" })).toEqual({});
  });
});

describe("describeEvent", () => {
  it("says what died, how, after how long, and when it comes back", () => {
    expect(
      describeEvent({
        kind: "exited",
        name: "backend-01",
        pid: 42,
        status: { code: null, signal: "SIGKILL" },
        ranMs: 12_345,
        restart: { number: 1, inMs: 1_000 },
      }),
    ).toBe("backend-01 (pid 42) killed by SIGKILL after 12 s; restart 1 in 1.0 s");
    expect(
      describeEvent({ kind: "exited", name: "broker", pid: 7, status: { code: 1, signal: null }, ranMs: 800, restart: undefined }),
    ).toBe("broker (pid 7) exited with code 1 after 0.8 s; not restarted (--no-restart)");
    expect(describeEvent({ kind: "restarted", name: "frontend-0", pid: 50, previousPid: 42, restarts: 2 })).toBe(
      "frontend-0 restarted (pid 50, was 42; 2 restarts)",
    );
    expect(
      describeEvent({
        kind: "restart-failed",
        name: "predictor",
        reason: "exited (code 1) before it was ready",
        restart: { number: 3, inMs: 30_000 },
      }),
    ).toBe("predictor did not come back: exited (code 1) before it was ready; restart 3 in 30 s");
  });
});
