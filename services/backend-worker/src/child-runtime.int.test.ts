/**
 * The best-effort process of a harvesting backend, as a real child process: it computes, a stop holds its
 * computation where it is (the process is in state T and the call takes the stop's length longer), a continue
 * lets it finish, and discarding kills it and fails its call, the next call starting a new process.
 */
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { seededRandom } from "@infergrid/core";
import type { ModelSpec } from "@infergrid/models";
import { afterEach, describe, expect, it } from "vitest";
import { ChildRuntime, pausableSleep } from "./child-runtime.js";

const ITEM_MS = 300;
const SPEC: ModelSpec = { kind: "emulated", profile: { shape: 0, loc: ITEM_MS, scale: 0 }, coldStartMs: 20 };
const INPUTS = { x: { dims: [1, 4], data: new Float32Array([1, 2, 3, 4]) } };

/** The process's state letter from /proc (R running, S sleeping, T stopped). */
function stateOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
}

describe("a best-effort model in a child process", () => {
  const runtimes: ChildRuntime[] = [];
  const make = () => {
    const r = new ChildRuntime(SPEC, seededRandom(1));
    runtimes.push(r);
    return r;
  };
  afterEach(() => {
    for (const r of runtimes.splice(0)) r.discard();
  });

  it("computes in its own process", async () => {
    const r = make();
    await r.load();
    expect(r.pid).toBeGreaterThan(0);
    expect(r.pid).not.toBe(process.pid);
    const t0 = performance.now();
    const out = await r.infer(INPUTS);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(ITEM_MS - 5);
    expect(out.computeMs).toBeGreaterThan(0);
    expect(Object.keys(out.outputs).length).toBeGreaterThan(0);
  });

  it("holds a computation while stopped and finishes it after", async () => {
    const r = make();
    await r.load();
    const t0 = performance.now();
    const call = r.infer(INPUTS);
    await sleep(100);
    r.pause();
    await sleep(50);
    expect(stateOf(r.pid as number)).toBe("T");
    await sleep(550);
    r.resume();
    await call;
    // 300 ms of computing and 600 of being stopped: it resumed where it was, not from the start.
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(ITEM_MS + 550);
    expect(took).toBeLessThan(ITEM_MS + 600 + 400);
    expect(stateOf(r.pid as number)).not.toBe("T");
  });

  it("a discarded process fails its call, and the next call starts a new one, stopped if the runtime is", async () => {
    const r = make();
    await r.load();
    const first = r.pid;
    const call = r.infer(INPUTS);
    r.pause();
    r.discard();
    await expect(call).rejects.toThrow(/discarded/);
    const next = r.infer(INPUTS);
    await sleep(200);
    expect(r.pid).toBeDefined();
    expect(r.pid).not.toBe(first);
    expect(stateOf(r.pid as number)).toBe("T");
    r.resume();
    await expect(next).resolves.toBeDefined();
  });
});

describe("a best-effort process that fails", () => {
  it("an 'error' of its process (a failed fork, a message to a process gone) fails its calls, and the next call starts anew", async () => {
    const r = new ChildRuntime(SPEC, seededRandom(1));
    try {
      await r.load();
      const first = r.pid;
      const call = r.infer(INPUTS);
      await sleep(50);
      // What Node emits when a fork fails at the pids limit, or a send finds the channel closed: with no
      // listener, an uncaught exception in the backend.
      const child: unknown = Reflect.get(r, "child");
      if (!(child instanceof EventEmitter)) throw new Error("no child process");
      child.emit("error", Object.assign(new Error("spawn EAGAIN"), { code: "EAGAIN" }));
      await expect(call).rejects.toThrow(/best-effort process failed: spawn EAGAIN/);
      const next = await r.infer(INPUTS);
      expect(next.computeMs).toBeGreaterThan(0);
      expect(r.pid).not.toBe(first);
    } finally {
      r.discard();
    }
  });
});

describe("the emulated model's sleep in a stoppable process", () => {
  it("sleeps about what it is asked", async () => {
    const t0 = performance.now();
    await pausableSleep(60);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55);
  });
});
