import { readFileSync } from "node:fs";
import { join } from "node:path";
import { seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { sampleBatches } from "./batch-sizes.js";
import { buildCatalogue } from "./catalogue.js";
import { flatType, pt } from "./test-support.js";
import { upperBound } from "./upper-bound.js";

// Base: 10 ms for any query (Q_b = Q_b^{s+} = 100 qps). Auxiliary: 20 ms up to batch 100, 1 s above, so it
// meets a 100 ms QoS below batch 200 (its violating batch). Half the queries are 50, half 500: f = 0.5,
// Q_a = 1000 / 20 = 50 qps.
const gpu = flatType("gpu", 1, 4, [pt(100, 10), pt(1000, 10)]);
const cpu = flatType("cpu", 0.25, 8, [pt(100, 20), pt(200, 1000), pt(1000, 1000)]);
const batches = [...Array(50).fill(50), ...Array(50).fill(500)];
const ub = upperBound({ types: [gpu, cpu], model: "m", qosMs: 100, batches });

describe("Kairos's upper bound on hand-worked cases", () => {
  it("finds the base type and each type's QoS region", () => {
    expect(ub.base).toBe(0);
    expect(ub.standings[1]?.violatingBatch).toBe(200);
    expect(ub.standings[1]?.smallShare).toBe(0.5);
    expect(ub.standings[0]?.qpsAll).toBeCloseTo(100);
  });
  it("a base-only pool serves u x Q_b", () => {
    expect(ub.of([3, 0])).toBeCloseTo(300);
  });
  it("Eq. 13 when the auxiliaries are the bottleneck: v Q_a / f + slack of the base", () => {
    // C = 1 x 50 x 0.5 / 0.5 = 50 < u Q_b^{s+} = 100: 50 / 0.5 + (100 - 50) / 100 x 100 = 150.
    expect(ub.of([1, 1])).toBeCloseTo(150);
  });
  it("Eq. 12 when the base is the bottleneck: u Q_b^{s+} / (1 - f)", () => {
    // C = 3 x 50 = 150 >= 100: 100 / 0.5 = 200, and more auxiliaries add nothing.
    expect(ub.of([1, 3])).toBeCloseTo(200);
    expect(ub.of([1, 8])).toBeCloseTo(200);
  });
  it("no base instance serves nothing (the large queries have nowhere to go)", () => {
    expect(ub.of([0, 4])).toBe(0);
  });
  it("refuses a mix no type can serve within QoS, naming where each type fails", () => {
    expect(() => upperBound({ types: [cpu], model: "m", qosMs: 100, batches })).toThrow(
      /no instance type meets the 100 ms QoS.*cpu exceeds it from batch 200/,
    );
  });
});

describe("on the Kairos artifact's measured profiles (../shared/profiles)", () => {
  const csv = readFileSync(join(import.meta.dirname, "../../../../shared/profiles/kairos-aws-4types.csv"), "utf8");
  const types = buildCatalogue(
    {
      profiles: "kairos-aws-4types.csv",
      types: [
        { name: "g4dn.xlarge", pricePerHour: 0.526, maxCount: 5 },
        { name: "c5n.2xlarge", pricePerHour: 0.432, maxCount: 6 },
        { name: "r5n.large", pricePerHour: 0.149, maxCount: 17 },
        { name: "t3.xlarge", pricePerHour: 0.1664, maxCount: 15 },
      ],
    },
    csv,
  );
  it("gives the artifact's own standings for RM2 (allocator_profile.json: GPU 15.04 qps; t3 violates from 400 with 83.7 % small)", () => {
    const b = upperBound({
      types,
      model: "rm2",
      qosMs: 350,
      batches: sampleBatches(seededRandom(1), { kind: "kairos-production" }, 10_000),
    });
    expect(b.base).toBe(0);
    expect(b.standings[0]?.qpsAll).toBeGreaterThan(15.04 * 0.97);
    expect(b.standings[0]?.qpsAll).toBeLessThan(15.04 * 1.03);
    expect(b.standings[3]?.violatingBatch).toBe(400);
    expect(Math.abs((b.standings[3]?.smallShare ?? 0) - 0.837)).toBeLessThan(0.015);
    expect(b.standings[1]?.violatingBatch).toBe(910);
  });
});
