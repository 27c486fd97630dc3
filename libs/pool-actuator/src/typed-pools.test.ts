import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LocalProcessActuator } from "./local.js";
import { splitPoolSize, TypedPools } from "./typed-pools.js";

const sizing = (current: number[], max: (number | undefined)[] = [], removable: number[] = []) =>
  current.map((c, i) => ({
    instanceType: `t${i}`,
    current: c,
    ...(max[i] !== undefined ? { max: max[i] } : {}),
    removable: removable[i] ?? 0,
  }));
const sizes = (m: Map<string, number>) => [...m.values()];

describe("splitPoolSize", () => {
  it("keeps the sizes when the total is already there", () => {
    expect(sizes(splitPoolSize(5, sizing([2, 3])))).toEqual([2, 3]);
  });

  it("grows the preferred type first, up to its max, then the next", () => {
    expect(sizes(splitPoolSize(6, sizing([1, 1], [4])))).toEqual([4, 2]);
    expect(sizes(splitPoolSize(3, sizing([1, 1], [4])))).toEqual([2, 1]);
  });

  it("places no more than the maxes allow, and cuts a pool above its max", () => {
    expect(sizes(splitPoolSize(10, sizing([0, 0], [2, 3])))).toEqual([2, 3]);
    expect(sizes(splitPoolSize(4, sizing([5, 0], [2])))).toEqual([2, 2]);
  });

  it("shrinks the removable backends first (least preferred type first), then the least preferred type", () => {
    expect(sizes(splitPoolSize(4, sizing([3, 3], [], [1, 0])))).toEqual([2, 2]);
    expect(sizes(splitPoolSize(3, sizing([3, 3], [], [2, 1])))).toEqual([1, 2]);
    expect(sizes(splitPoolSize(1, sizing([3, 3])))).toEqual([1, 0]);
    expect(sizes(splitPoolSize(0, sizing([3, 3], [], [9, 9])))).toEqual([0, 0]);
  });

  it("refuses a bad total", () => {
    expect(() => splitPoolSize(-1, sizing([1]))).toThrow(RangeError);
  });
});

/**
 * Real processes, as in local.test.ts: a tiny script stands in for backend-worker at its edges (the
 * JSON ready line, SIGTERM) and puts the instance type it was started with in its ready line.
 */
const dir = mkdtempSync(join(tmpdir(), "typed-pools-"));
const fakeBackend = join(dir, "backend.mjs");
writeFileSync(
  fakeBackend,
  `const id = process.env.INFERGRID_ID;
   setTimeout(() => console.log(JSON.stringify({ event: "ready", id, instanceType: process.env.INFERGRID_INSTANCE_TYPE ?? "" })), 50);
   const keep = setInterval(() => {}, 1000);
   process.on("SIGTERM", () => { clearInterval(keep); process.exit(0); });`,
);

let pools: TypedPools | undefined;
afterEach(async () => {
  await pools?.close();
  pools = undefined;
});

describe("TypedPools over local processes", () => {
  const typed = (lines: string[]) => {
    const local = (type: string, prefix: string) =>
      new LocalProcessActuator({ entry: fakeBackend, idPrefix: prefix, instanceType: type, onLine: (_id, l) => lines.push(l) });
    const a = local("g4dn.xlarge", "g");
    const b = local("r5n.large", "r");
    return {
      a,
      b,
      pools: new TypedPools([
        { instanceType: "g4dn.xlarge", actuator: a, maxCount: 2 },
        { instanceType: "r5n.large", actuator: b },
      ]),
    };
  };

  it("starts backends of each type with INFERGRID_INSTANCE_TYPE set, and reports members per type", async () => {
    const lines: string[] = [];
    const t = typed(lines);
    pools = t.pools;
    await pools.scaleTypesTo({ "g4dn.xlarge": 2, "r5n.large": 1 });
    await Promise.all([t.a.waitReady(5000), t.b.waitReady(5000)]);
    expect(await pools.currentSizes()).toEqual(
      new Map([
        ["g4dn.xlarge", 2],
        ["r5n.large", 1],
      ]),
    );
    const byType = await pools.membersByType();
    expect(byType.get("g4dn.xlarge")?.map((m) => m.id)).toEqual(["g-0", "g-1"]);
    expect(byType.get("r5n.large")?.map((m) => m.id)).toEqual(["r-0"]);
    const ready = lines.map((l) => JSON.parse(l) as { id: string; instanceType: string });
    expect(ready.map((r) => `${r.id}:${r.instanceType}`).sort()).toEqual(["g-0:g4dn.xlarge", "g-1:g4dn.xlarge", "r-0:r5n.large"]);
  });

  it("scaleTo splits one size over the types and stops the backends to remove first in their own pool", async () => {
    const t = typed([]);
    pools = t.pools;
    await pools.scaleTo(4);
    await Promise.all([t.a.waitReady(5000), t.b.waitReady(5000)]);
    expect(await pools.currentSizes()).toEqual(
      new Map([
        ["g4dn.xlarge", 2],
        ["r5n.large", 2],
      ]),
    );
    await pools.scaleTo(2, { removeFirst: ["g-0", "r-0"] });
    expect((await pools.members()).map((m) => m.id)).toEqual(["g-1", "r-1"]);
    expect(await pools.currentSize()).toBe(2);
  });

  it("refuses pools it cannot run together", () => {
    const local = new LocalProcessActuator({ entry: fakeBackend });
    expect(() => new TypedPools([])).toThrow(/at least one instance type/);
    expect(
      () =>
        new TypedPools([
          { instanceType: "a", actuator: local },
          { instanceType: "a", actuator: local },
        ]),
    ).toThrow(/instance type a has two pools/);
    expect(() => new TypedPools([{ instanceType: " ", actuator: local }])).toThrow(/empty instance type/);
  });
});
