import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { POLICY_NAMES } from "@infergrid/themis";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "./cli.js";
import type { ThemisScenarioResult } from "./themis-experiment.js";

const dir = mkdtempSync(join(tmpdir(), "ig-themis-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const stderr = new PassThrough();
  stderr.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const code = await main(args, { stdout: { write: (t: string) => (out += t) }, stderr });
  return { code, out, err };
}

/** A Themis scenario file for resnet34's measured profile and a 1 s SLO, with `rest` (YAML lines) added. */
function scenarioFile(name: string, rest: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, `kind: themis\nprofile: { file: measured-ort-cpu-16core.json, model: resnet34 }\nsloMs: 1000\n${rest}\n`);
  return file;
}

describe("npm run sim -- themis-*", () => {
  it("runs the surge and prints every policy's row; results.json holds each policy's mean", async () => {
    const out = join(dir, "surge");
    const r = await cli(["themis-surge", "--seeds", "1", "--out", out]);
    expect(r.code, r.err).toBe(0);
    for (const p of POLICY_NAMES) expect(r.out).toMatch(new RegExp(`^\\| ${p} \\| \\d+ \\|`, "m"));
    const result = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as ThemisScenarioResult;
    expect(result.summary.map((s) => s.policy)).toEqual([...POLICY_NAMES]);
    const by = Object.fromEntries(result.summary.map((s) => [s.policy, s]));
    // Every policy saw the same arrivals (one seed): about 20/s for 115 s and 120/s for 5 s.
    const requests = new Set(result.summary.map((s) => s.requests));
    expect(requests.size).toBe(1);
    expect(by.infergrid?.requests).toBeGreaterThan(2600);
    expect(by.infergrid?.requests).toBeLessThan(3200);
    // A 10 s cold start cannot absorb a 5 s surge: horizontal-only is late on much of it; vertical is not.
    expect(by["horizontal-only"]?.violations).toBeGreaterThan(300);
    expect(by.infergrid?.violations).toBeLessThan((by["horizontal-only"]?.violations ?? 0) / 5);
    expect(by.infergrid?.resizes).toBeGreaterThan(0);
    expect(by["horizontal-only"]?.resizes).toBe(0);
    expect(by["vertical-only"]?.coldStarts).toBe(0);
    for (const s of result.summary) expect(s.coreSeconds).toBeGreaterThan(2 * 120 * 0.99);
    // report.md says what each policy did: infergrid resizes in place on the surge's first tick.
    const report = readFileSync(join(out, "report.md"), "utf8");
    for (const p of POLICY_NAMES) expect(report).toContain(`### ${p}`);
    expect(report).toMatch(/^\| 31 \| \d+ \| \d+ \| \d+ \| vertical \|.*surge/m);
  });

  it("a trace scenario cut with --from-minute/--minutes; --check validates without running", async () => {
    const check = await cli(["themis-faro", "--check"]);
    expect(check.code, check.err).toBe(0);
    expect(check.out).toMatch(/valid: themis-faro, resnet34 .* serve-cluster9, minutes 0-359, peak 120\/s; 4 policies x 3 seeds/);
    // Past the slice: refused (it was cut short silently and reported as asked).
    const past = await cli(["themis-faro", "--from-minute", "300", "--minutes", "100", "--check"]);
    expect(past.code).toBe(2);
    expect(past.err).toMatch(/--minutes 100: minutes 300-399 reach past the scenario's minutes 0-359/);
    const out = join(dir, "faro");
    const r = await cli(["themis-faro", "--minutes", "2", "--seeds", "1", "--policies", "infergrid,horizontal-only", "--out", out]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^\| infergrid \|/m);
    expect(r.out).toMatch(/^\| horizontal-only \|/m);
    expect(r.out).not.toMatch(/^\| vertical-only \|/m);
    const result = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as ThemisScenarioResult;
    expect(result.scenario.durationMs).toBe(120_000);
  });

  it("refuses an unknown policy, steps off whole seconds and the Azure hold-out, naming the field", async () => {
    expect((await cli(["themis-surge", "--policies", "nope"])).err).toMatch(/unknown policy 'nope' for a themis scenario/);
    const steps = scenarioFile("steps", "load: { kind: steps, steps: [{ untilMs: 1500, ratePerS: 5 }] }");
    const a = await cli(["--scenario", steps, "--check"]);
    expect(a.code).toBe(2);
    expect(a.err).toMatch(/load\.steps\.0\.untilMs: must be a whole second/);
    const holdout = scenarioFile(
      "holdout",
      "load: { kind: trace, file: azure-functions-2019-12fn-days8-12-per-minute.csv, job: fn04, fromMinute: 2000, minutes: 900, peakPerS: 50 }",
    );
    const b = await cli(["--scenario", holdout, "--check"]);
    expect(b.code).toBe(2);
    expect(b.err).toMatch(/hold-out/);
    // --check reads the trace: a job it lacks is named by its field (a run failed with exit 1 and no path).
    const nojob = scenarioFile("nojob", "load: { kind: trace, file: faro-10jobs-6h-per-minute.csv, job: nope, minutes: 10, peakPerS: 50 }");
    const c = await cli(["--scenario", nojob, "--check"]);
    expect(c.code).toBe(2);
    expect(c.err).toMatch(/load\.job: no column "nope" in faro-10jobs-6h-per-minute\.csv; its jobs: serve-cluster0/);
  });

  it("refuses a load or a tick the simulator cannot hold, naming the field (a rate of 1e12/s ran out of memory)", async () => {
    const huge = scenarioFile("huge", "tickMs: 0.000001\nload: { kind: steps, steps: [{ untilMs: 60000, ratePerS: 1000000000000 }] }");
    const r = await cli(["--scenario", huge, "--check"]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/load: about 60,000,000,000,000 requests; the simulator replays at most 100,000,000/);
    expect(r.err).toMatch(/tickMs: 0\.000001 ms gives 60000000000 ticks over the run; at most 10000000/);
  });
});
