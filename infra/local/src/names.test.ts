import { describe, expect, it } from "vitest";
import { sanitiseServiceName, uniqueServiceNames } from "./names.js";

const VALID = /^[a-z0-9][a-z0-9-]{0,62}$/;

describe("sanitiseServiceName", () => {
  it.each([
    ["serve-cluster0", "serve-cluster0"],
    ["Serve_Cluster 1", "serve-cluster-1"],
    ["--fn..06--", "fn-06"],
    ["a1b2c3d4", "a1b2c3d4"],
    ["Ünïcode/Job", "n-code-job"],
    ["___", "job"],
    ["", "job"],
  ])("%j -> %j", (job, name) => {
    expect(sanitiseServiceName(job)).toBe(name);
    expect(name).toMatch(VALID);
  });

  it("cuts long names to 63 characters without a trailing dash", () => {
    const name = sanitiseServiceName(`${"a".repeat(62)}-b${"c".repeat(20)}`);
    expect(name).toBe("a".repeat(62));
    expect(sanitiseServiceName("x".repeat(100))).toHaveLength(63);
  });
});

describe("uniqueServiceNames", () => {
  it("gives jobs that sanitise alike distinct names, in order", () => {
    const names = uniqueServiceNames(["Fn.A", "fn-a", "FN_A", "other"]);
    expect([...names.values()]).toEqual(["fn-a", "fn-a-2", "fn-a-3", "other"]);
  });

  it("keeps a suffixed long name within 63 characters", () => {
    const long = "y".repeat(80);
    const names = [...uniqueServiceNames([long, `${long}!`]).values()];
    expect(names[0]).toHaveLength(63);
    expect(names[1]).toMatch(/-2$/);
    expect(names[1]).toHaveLength(63);
    for (const n of names) expect(n).toMatch(VALID);
  });
});
