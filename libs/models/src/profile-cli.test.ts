import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { parseThemisProfileFile } from "@infergrid/themis";
import { afterAll, describe, expect, it } from "vitest";
import { main, parseProfileArgs } from "./profile-cli.js";
import { ensureResnet18Onnx } from "./resnet-onnx.js";

function capture() {
  let out = "";
  let err = "";
  return {
    io: {
      stdout: (t: string) => {
        out += t;
      },
      stderr: (t: string) => {
        err += t;
      },
      now: () => new Date("2026-11-24T18:00:00Z"),
    },
    out: () => out,
    err: () => err,
  };
}

function hasTaskset(): boolean {
  try {
    execFileSync("taskset", ["-p", String(process.pid)]);
    return true;
  } catch {
    return false;
  }
}

// Read before a run pins this process to fewer CPUs.
const CPUS = availableParallelism();

describe("npm run profile", () => {
  const tmp = mkdtempSync(join(tmpdir(), "profile-"));
  afterAll(() => {
    rmSync(tmp, { recursive: true, force: true });
    // The profile pins this process to the CPUs of its last size; give the rest of the file every CPU back.
    if (hasTaskset()) execFileSync("taskset", ["-a", "-p", "-c", `0-${CPUS - 1}`, String(process.pid)]);
  });

  it.runIf(availableParallelism() >= 2)(
    "measures resnet18 at batch 1-2 on 1 and 2 threads, prints the fit's error and writes a valid profile file",
    async () => {
      ensureResnet18Onnx();
      const out = join(tmp, "resnet18.json");
      const c = capture();
      const code = await main(["resnet18", "--batches", "1,2", "--threads", "1,2", "--runs", "2", "--warmups", "1", "--out", out], c.io);
      expect(c.err()).toContain("threads 2 batch 2:");
      expect(code).toBe(0);
      const file = parseThemisProfileFile(readFileSync(out, "utf8"), out);
      expect(file.model).toBe("resnet18");
      expect(file.date).toBe("2026-11-24T18:00:00.000Z");
      expect(file.machine.cores).toBe(CPUS);
      expect(file.samples.map((s) => [s.cores, s.batch])).toEqual([
        [1, 1],
        [1, 2],
        [2, 1],
        [2, 2],
      ]);
      for (const s of file.samples) {
        // ResNet-18 is 1.8 GFLOPs an image: no CPU runs it in under a millisecond.
        expect(s.ms).toBeGreaterThan(1);
        expect(s.minMs).toBeLessThanOrEqual(s.ms);
        expect(s.maxMs).toBeGreaterThanOrEqual(s.ms);
      }
      // Two images cost more than one at the same threads.
      expect(file.samples[1]?.ms).toBeGreaterThan(file.samples[0]?.ms ?? Number.POSITIVE_INFINITY);
      expect(file.resizes.map((r) => [r.fromCores, r.toCores])).toEqual([
        [1, 2],
        [2, 1],
      ]);
      for (const r of file.resizes) expect(r.ms).toBeGreaterThan(0);
      expect(file.method).toMatchObject({ warmups: 1, runs: 2, statistic: "median", pinnedCpus: true });
      expect(file.method.loadAverage).toBeGreaterThanOrEqual(0);
      const mean = (file.fit.meanAbsPctError * 100).toFixed(1);
      expect(c.out()).toContain(`fit error: mean ${mean} %`);
      expect(c.out()).toMatch(/resize 1 -> 2 threads in place: \d+\.\d ms/);
      expect(c.out()).toContain(`wrote ${out}`);
      // The run ended on 1 thread: the process is pinned to one CPU where taskset exists.
      if (hasTaskset()) expect(execFileSync("taskset", ["-p", String(process.pid)], { encoding: "utf8" })).toMatch(/mask: 1$/m);
    },
    60_000,
  );

  const bad: [string, string[], RegExp][] = [
    ["no model", [], /no model given \(the catalogue has ppocr-mobile-cls, resnet18\)/],
    ["an unknown model", ["resnet50"], /unknown model "resnet50"/],
    ["batch 0", ["resnet18", "--batches", "0,1"], /--batches: "0" is not an integer from 1 to 256/],
    ["a batch that is not a number", ["resnet18", "--batches", "1,two"], /--batches: "two"/],
    ["more threads than CPUs", ["resnet18", "--threads", "1,3"], /--threads: "3" is not an integer from 1 to 2/],
    ["a repeated thread count", ["resnet18", "--threads", "1,1"], /--threads: 1 is listed twice/],
    ["one thread count", ["resnet18", "--batches", "1,2,4,8", "--threads", "1"], /at least 2 thread counts/],
    ["too few points", ["resnet18", "--batches", "1", "--threads", "1,2"], /at least 4 \(batch, threads\) points, 1 x 2 = 2/],
    ["runs 0", ["resnet18", "--runs", "0"], /--runs: "0" is not an integer from 1/],
    ["an unknown option", ["resnet18", "--thread", "2"], /Unknown option '--thread'/],
    ["two models", ["resnet18", "ppocr-mobile-cls"], /one model at a time/],
  ];
  it.each(bad)("exits 2 with a message on %s", async (_case, argv, message) => {
    expect(() => parseProfileArgs(argv, 2)).toThrow(message);
    if (availableParallelism() !== 2) return;
    const c = capture();
    expect(await main(argv, c.io)).toBe(2);
    expect(c.err()).toMatch(message);
    expect(c.err()).toContain("usage: npm run profile -- <model>");
    expect(c.out()).toBe("");
  });

  it("defaults to batches 1,2,4,8, threads 1 up to the CPUs, 10 runs after 2 warm-ups, pinned", () => {
    const args = parseProfileArgs(["resnet18"], 2);
    expect(args).toMatchObject({ model: "resnet18", batches: [1, 2, 4, 8], threads: [1, 2], runs: 10, warmups: 2, pinCpus: true });
    expect(args.out).toMatch(/libs\/models\/generated\/profiles\/resnet18\.json$/);
    expect(parseProfileArgs(["resnet18", "--no-pin", "--threads", "2,1"], 2)).toMatchObject({ threads: [2, 1], pinCpus: false });
  });
});
