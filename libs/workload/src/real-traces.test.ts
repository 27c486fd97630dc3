import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { readTraceFile } from "./read.js";
import { jobCounts, peakPerMinute, scaleToPeak, selectJobs, sliceMinutes, totalRequests } from "./trace.js";

// The traces live beside the repository (never copied into it): /work/shared/traces.
const tracesDir = new URL("../../../../shared/traces/", import.meta.url);
const present = existsSync(fileURLToPath(tracesDir));
if (!present) console.warn(`skipping real-trace tests: ${fileURLToPath(tracesDir)} is absent`);

const faroFile = new URL("faro-10jobs-6h-per-minute.csv", tracesDir);
const azureFile = new URL("azure-functions-2019-12fn-days8-12-per-minute.csv", tracesDir);

describe.skipIf(!present)("real traces in ../shared/traces", () => {
  it("reads the Faro 10-job, 6-hour file", async () => {
    const trace = await readTraceFile(faroFile);
    expect(trace.source).toBe("faro-10jobs-6h-per-minute.csv");
    expect(trace.minutes).toBe(360);
    expect(trace.jobs).toEqual(Array.from({ length: 10 }, (_, i) => `serve-cluster${i}`));
    expect(jobCounts(trace, "serve-cluster0")[0]).toBe(957);
    expect(jobCounts(trace, "serve-cluster9")[0]).toBe(101);
    expect(jobCounts(trace, "serve-cluster0")[359]).toBe(1002);
    expect(totalRequests(trace, "serve-cluster0")).toBe(343_187);
    expect(peakPerMinute(trace, "serve-cluster4")).toBe(1477);
  });

  it("reads the Azure 12-function, 5-day file and slices the tuning days", async () => {
    const trace = await readTraceFile(azureFile);
    expect(trace.minutes).toBe(7200);
    expect(trace.jobs).toEqual(Array.from({ length: 12 }, (_, i) => `fn${String(i).padStart(2, "0")}`));
    expect(jobCounts(trace, "fn00")[0]).toBe(141);
    expect(jobCounts(trace, "fn06")[0]).toBe(182);
    expect(jobCounts(trace, "fn06")[2880]).toBe(252);
    expect(peakPerMinute(trace, "fn06")).toBe(5317);
    expect(peakPerMinute(trace, "fn10")).toBe(29);
    // Days 8 and 9 only: minutes 2880.. are the evaluation hold-out.
    const tuning = sliceMinutes(trace, 0, 2880);
    expect(tuning.minutes).toBe(2880);
    expect(jobCounts(tuning, "fn00")[0]).toBe(141);
  });

  it("scales an uneven Azure job to a cluster-sized peak", async () => {
    const trace = selectJobs(await readTraceFile(azureFile), ["fn06", "fn10"]);
    const scaled = scaleToPeak(trace, "fn06", 600);
    expect(peakPerMinute(scaled, "fn06")).toBeCloseTo(600, 9);
    expect(jobCounts(scaled, "fn06")[0]).toBeCloseTo((182 * 600) / 5317, 9);
    expect(peakPerMinute(scaled, "fn10")).toBe(29);
    expect(scaled.source).toContain("fn06 x");
    // The input is untouched.
    expect(peakPerMinute(trace, "fn06")).toBe(5317);
  });
});
