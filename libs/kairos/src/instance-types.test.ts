import { describe, expect, it } from "vitest";
import { parseProfileCsv, profileOf, serviceMs } from "./instance-types.js";
import { flatType, pt } from "./test-support.js";

const profile = { points: [pt(10, 2), pt(20, 3), pt(30, 5)] };

describe("serviceMs", () => {
  it("rounds a query up to the next profiled batch, as Kairos's artifact does", () => {
    expect(serviceMs(profile, 1)).toBe(2);
    expect(serviceMs(profile, 10)).toBe(2);
    expect(serviceMs(profile, 11)).toBe(3);
    expect(serviceMs(profile, 30)).toBe(5);
  });
  it("extrapolates linearly past the largest profiled batch", () => {
    expect(serviceMs(profile, 40)).toBeCloseTo(7);
  });
  it("reads the p99 column when asked", () => {
    const p = { points: [{ batch: 10, meanMs: 2, p99Ms: 4 }] };
    expect(serviceMs(p, 5, "p99")).toBe(4);
  });
});

describe("parseProfileCsv", () => {
  const header = "instance_type,model,batch,mean_ms,p50_ms,p99_ms,samples";
  it("groups rows by type and model, sorted by batch", () => {
    const t = parseProfileCsv(`${header}\na,m,20,3,3,4,99\na,m,10,2,2,3,99\nb,m,10,1,1,1,99\n`);
    expect(
      t
        .get("a")
        ?.get("m")
        ?.points.map((p) => p.batch),
    ).toEqual([10, 20]);
    expect(t.get("b")?.get("m")?.points[0]?.meanMs).toBe(1);
  });
  it("names the line of a malformed row", () => {
    expect(() => parseProfileCsv(`${header}\na,m,10,2,2,3,99\na,m,x,2,2,3,99`)).toThrow(/line 3: batch/);
    expect(() => parseProfileCsv(`${header}\na,m,10,-2,2,3,99`)).toThrow(/line 2: latencies/);
  });
  it("refuses a table without a needed column and a batch given twice", () => {
    expect(() => parseProfileCsv("instance_type,model,batch\na,m,1")).toThrow(/no "mean_ms" column/);
    expect(() => parseProfileCsv(`${header}\na,m,10,2,2,3,99\na,m,10,2,2,3,99`)).toThrow(/batch 10 twice/);
  });
});

it("profileOf names the type, the model and the models it has", () => {
  expect(() => profileOf(flatType("gpu", 1, 1, [pt(10, 1)]), "bert")).toThrow(/gpu has no latency profile for model bert \(it has: m\)/);
});
