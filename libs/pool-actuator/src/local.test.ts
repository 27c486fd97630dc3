import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LocalProcessActuator } from "./local.js";

/**
 * The local actuator starts and stops real processes. The "backend" here is a tiny script that
 * behaves like backend-worker at its edges (prints the JSON ready line, drains on SIGTERM), so the
 * test needs neither a build nor NATS; the container drills run the real backend-worker.
 */
const dir = mkdtempSync(join(tmpdir(), "pool-actuator-"));
const fakeBackend = join(dir, "backend.mjs");
writeFileSync(
  fakeBackend,
  `const id = process.env.INFERGRID_ID;
   setTimeout(() => console.log(JSON.stringify({ event: "ready", id, grpcAddress: "127.0.0.1:1" })), 50);
   const keep = setInterval(() => {}, 1000);
   process.on("SIGTERM", () => { if (process.env.IGNORE_TERM !== "1") { clearInterval(keep); process.exit(0); } });`,
);

let actuator: LocalProcessActuator | undefined;
afterEach(async () => {
  await actuator?.close();
});

describe("LocalProcessActuator", () => {
  it("grows the pool with new backend processes with fresh ids, and reports them ready", async () => {
    const lines: string[] = [];
    actuator = new LocalProcessActuator({ entry: fakeBackend, idPrefix: "b", onLine: (id, l) => lines.push(`${id} ${l}`) });
    await actuator.scaleTo(3);
    expect(await actuator.currentSize()).toBe(3);
    await actuator.waitReady(5000);
    const members = await actuator.members();
    expect(members.map((m) => m.id)).toEqual(["b-0", "b-1", "b-2"]);
    expect(members.every((m) => m.ready && !m.terminating)).toBe(true);
    expect(lines.filter((l) => l.includes('"event":"ready"'))).toHaveLength(3);
  });

  it("shrinks by stopping the preferred backends first, then the newest, and never reuses an id", async () => {
    actuator = new LocalProcessActuator({ entry: fakeBackend, idPrefix: "b" });
    await actuator.scaleTo(4);
    await actuator.waitReady(5000);
    await actuator.scaleTo(2, { removeFirst: ["b-1"] });
    expect((await actuator.members()).map((m) => m.id)).toEqual(["b-0", "b-2"]);
    await actuator.scaleTo(3);
    expect((await actuator.members()).map((m) => m.id)).toEqual(["b-0", "b-2", "b-4"]);
  });

  it("kills a backend that ignores SIGTERM after the stop timeout", async () => {
    actuator = new LocalProcessActuator({ entry: fakeBackend, env: { IGNORE_TERM: "1" }, stopTimeoutMs: 300 });
    await actuator.scaleTo(1);
    await actuator.waitReady(5000);
    const t0 = Date.now();
    await actuator.scaleTo(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    expect(await actuator.members()).toEqual([]);
  });

  it("a backend that exits by itself leaves the pool; asking for the size again replaces it", async () => {
    actuator = new LocalProcessActuator({ entry: fakeBackend, idPrefix: "b" });
    await actuator.scaleTo(2);
    await actuator.waitReady(5000);
    const pid = await pidOf(actuator, "b-0");
    process.kill(pid, "SIGKILL");
    await waitFor(async () => (await actuator!.members()).length === 1);
    await actuator.scaleTo(2);
    expect((await actuator.members()).map((m) => m.id)).toEqual(["b-1", "b-2"]);
  });

  it("refuses a negative or fractional size", async () => {
    actuator = new LocalProcessActuator({ entry: fakeBackend });
    await expect(actuator.scaleTo(-1)).rejects.toThrow(RangeError);
    await expect(actuator.scaleTo(0.5)).rejects.toThrow(RangeError);
  });
});

async function pidOf(a: LocalProcessActuator, id: string): Promise<number> {
  const pid = a.pidOf(id);
  if (pid === undefined) throw new Error(`no process ${id}`);
  return pid;
}

async function waitFor(cond: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error("condition not met");
    await new Promise((r) => setTimeout(r, 20));
  }
}
