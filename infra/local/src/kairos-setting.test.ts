import { readFileSync } from "node:fs";
import { parseProfileCsv, serviceMs } from "@infergrid/kairos";
import { describe, expect, it } from "vitest";
import { batchSampler, defaultProfilesFile, isLarge, kairosModels, loadKairosSetting } from "./kairos-setting.js";
import { OptionsError } from "./options.js";

const TYPES = [
  { type: "g4dn.xlarge", count: 2 },
  { type: "t3.xlarge", count: 3 },
];

function problemOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    if (err instanceof OptionsError) return err.message;
    throw err;
  }
  throw new Error("expected an OptionsError");
}

describe("loadKairosSetting", () => {
  it("takes DIEN's QoS and prices from its scenario and its profiles from the shared table", () => {
    const k = loadKairosSetting("dien", TYPES, undefined, 1);
    expect(k.qosMs).toBe(35);
    expect(k.types.map((t) => [t.name, t.pricePerHour, t.maxCount])).toEqual([
      ["g4dn.xlarge", 0.526, 2],
      ["t3.xlarge", 0.1664, 3],
    ]);
    expect(k.base).toBe("g4dn.xlarge");
    expect(k.cheapest).toBe("t3.xlarge");
    // Large: above the t3's largest profiled batch whose mean meets QoS, and the next one does not.
    const t3 = parseProfileCsv(readFileSync(defaultProfilesFile(), "utf8")).get("t3.xlarge")?.get("dien");
    if (!t3) throw new Error("no t3 profile");
    expect(serviceMs(t3, k.largeAbove)).toBeLessThanOrEqual(k.qosMs);
    expect(serviceMs(t3, k.largeAbove + 1)).toBeGreaterThan(k.qosMs);
    expect(isLarge(k, k.largeAbove)).toBe(false);
    expect(isLarge(k, k.largeAbove + 1)).toBe(true);
    const spec = k.service.spec;
    expect(spec.sla).toMatchObject({ latencyThresholdMs: 35, percentile: 99 });
    expect(spec.model?.instanceProfiles?.map((p) => p.instanceType)).toEqual(["g4dn.xlarge", "t3.xlarge"]);
    expect(spec.model?.instanceProfiles?.[1]?.points?.length).toBe(t3.points.length);
    expect([spec.minBackends, spec.maxBackends, spec.initialBackends]).toEqual([5, 5, 5]);
  });

  it("refuses what it cannot serve, naming the option", () => {
    expect(kairosModels()).toContain("dien");
    expect(problemOf(() => loadKairosSetting("bert", TYPES, undefined, 1))).toMatch(
      /--kairos: no Kairos scenario for model "bert".*known: .*dien/,
    );
    expect(problemOf(() => loadKairosSetting("dien", [{ type: "m5.large", count: 1 }], undefined, 1))).toContain(
      "--types: instance type m5.large is not in Kairos's catalogue",
    );
    expect(problemOf(() => loadKairosSetting("dien", [{ type: "g4dn.xlarge", count: 6 }], undefined, 1))).toContain(
      "g4dn.xlarge=6 is more than Kairos's limit of 5",
    );
    // No type of these meets DIEN's QoS for the largest queries of the mix.
    expect(problemOf(() => loadKairosSetting("dien", [{ type: "t3.xlarge", count: 3 }], undefined, 1))).toContain(
      "--types: no instance type meets the 35 ms QoS of dien",
    );
    expect(problemOf(() => loadKairosSetting("dien", TYPES, "/nonexistent/profiles.csv", 1))).toContain("--profiles: no such file");
  });

  it("draws the same batch sizes for the same seed, from Kairos's production mix", () => {
    const a = batchSampler(7);
    const b = batchSampler(7);
    const xs = Array.from({ length: 200 }, () => a());
    expect(Array.from({ length: 200 }, () => b())).toEqual(xs);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...xs)).toBeLessThan(1000);
  });
});
