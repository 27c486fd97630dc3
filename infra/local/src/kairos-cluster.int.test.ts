import { readFileSync } from "node:fs";
import { parseProfileCsv, profileOf, upperBound } from "@infergrid/kairos";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultProfilesFile } from "./kairos-setting.js";
import type { Summary } from "./summary.js";
import { accepts, alive, freshRunDir, processesMentioning, removeRunDir, runCli, runCliRefused } from "./test-support.js";

/**
 * The heterogeneous mode on real processes (compiled dist/, nats-server, the allocator whose typed pools
 * start 2 g4dn.xlarge and 3 t3.xlarge backend-workers, two frontends, the broker): DIEN with the Kairos
 * artifact's profiles, queries sized by Kairos's production mix. Checked through --summary-json: large
 * queries on the fast type, small ones mostly on the cheap one, every request answered or failed, and
 * nothing left running, the allocator's backends included. Needs `npx tsc -b`.
 */
interface SummaryJson extends Summary {
  processes: Array<{ name: string; pid: number; log: string }>;
  heterogeneous: {
    model: string;
    qosMs: number;
    baseType: string;
    largeAbove: number | null;
    types: Array<{ name: string; backends: number; pricePerHour: number }>;
    backends: Array<{ id: string; instanceType: string; address: string }>;
  };
}

const FAST = "g4dn.xlarge";
const CHEAP = "t3.xlarge";
let dir: string;

beforeAll(() => {
  dir = freshRunDir("ig-kairos-");
});

afterAll(() => removeRunDir(dir));

describe("npm start -- --kairos (infra/local)", () => {
  it("refuses a type Kairos's catalogue lacks, with status 2 and the known types", () => {
    const { code, stderr } = runCliRefused(["--kairos", "dien", "--types", `${FAST}=2,m5.large=1`]);
    expect(code).toBe(2);
    expect(stderr).toContain("--types: instance type m5.large is not in Kairos's catalogue");
    expect(stderr).toContain(CHEAP);
  });

  it("serves large queries on the fast type and small ones on the cheap type, and accounts for every request", async () => {
    const run = await runCli<SummaryJson>(dir, [
      "--kairos",
      "dien",
      "--types",
      `${FAST}=2,${CHEAP}=3`,
      "--duration",
      "12",
      "--peak-rps",
      "20",
      "--frontends",
      "2",
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { summary } = run;
    const dien = summary.services[0];
    expect(summary.services.map((s) => s.service)).toEqual(["dien"]);
    if (!dien?.byInstanceType) throw new Error(`no per-type summary:\n${run.stdout}`);
    // Every request ends answered or failed: none lost, none left unsent.
    expect(dien.lost).toBe(0);
    expect(dien.notSent).toBe(0);
    expect(dien.answered + dien.failed).toBe(dien.sent);
    expect(dien.sent).toBeGreaterThan(150);
    expect(summary.totals.lost).toBe(0);

    // "Large" is libs/kairos's: above the largest batch the t3 serves within DIEN's QoS, from the same table.
    const table = parseProfileCsv(readFileSync(defaultProfilesFile(), "utf8"));
    const types = [FAST, CHEAP].map((name) => ({ name, pricePerHour: 1, maxCount: 1, profiles: table.get(name) ?? new Map() }));
    for (const t of types) profileOf(t, "dien");
    const standings = upperBound({ types, model: "dien", qosMs: summary.heterogeneous.qosMs, batches: [1000] }).standings;
    expect(summary.heterogeneous.largeAbove).toBe(standings[1]?.largestSmallBatch);
    expect(summary.heterogeneous.baseType).toBe(FAST);

    // The allocator's typed pools started exactly the asked backends of each type.
    const started = summary.heterogeneous.backends;
    expect(started.filter((b) => b.instanceType === FAST)).toHaveLength(2);
    expect(started.filter((b) => b.instanceType === CHEAP)).toHaveLength(3);

    const t = dien.byInstanceType;
    const row = (name: string) => t.types.find((r) => r.instanceType === name);
    expect(t.types.map((r) => r.instanceType)).toEqual([FAST, CHEAP]);
    expect(t.small.answered + t.small.failed + t.large.answered + t.large.failed).toBe(dien.sent);
    expect(t.large.answered).toBeGreaterThan(10);
    expect(t.small.answered).toBeGreaterThan(50);
    expect(row(FAST)?.large.share, "share of large queries on the fast type").toBeGreaterThanOrEqual(0.9);
    expect(row(CHEAP)?.small.share, "share of small queries on the cheap type").toBeGreaterThanOrEqual(0.75);
    expect((row(FAST)?.answered ?? 0) + (row(CHEAP)?.answered ?? 0)).toBe(dien.answered);
    expect(run.stdout).toContain("dien by instance type: large = batch >");

    // Nothing left behind: the CLI's processes and the backends the allocator started.
    expect(summary.processes.filter((p) => alive(p.pid))).toEqual([]);
    expect(processesMentioning(dir)).toEqual([]);
    expect(run.stdout).toContain("all processes stopped (0 left)");
    const stillServing = await Promise.all(started.map(async (b) => ((await accepts(b.address)) ? b.id : undefined)));
    expect(stillServing.filter(Boolean)).toEqual([]);
  }, 60_000);
});
