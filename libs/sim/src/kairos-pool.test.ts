import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { heterogeneityCoefficients, type InstanceType, type LatencyPoint, upperBound } from "@infergrid/kairos";
import { afterAll, describe, expect, it } from "vitest";
import { type CliIO, main } from "./cli.js";
import { type PoolSetting, simulatePool, throughputAtQos } from "./kairos-pool.js";
import { loadKairosScenario } from "./kairos-scenario.js";
import { defaultProfilesDir, scenariosDir } from "./paths.js";
import { ScenarioError } from "./scenario.js";

const pt = (batch: number, ms: number): LatencyPoint => ({ batch, meanMs: ms, p99Ms: ms });
const type = (name: string, price: number, points: LatencyPoint[]): InstanceType => ({
  name,
  pricePerHour: price,
  maxCount: 10,
  profiles: new Map([["m", { points }]]),
});
// A fast type that meets 50 ms for any query, and a cheap one 3 x slower on small queries and 4 x on the
// largest (coefficient 0.25) that meets it up to batch 200.
const fast = type("fast", 1, [pt(100, 5), pt(200, 10), pt(400, 20), pt(600, 30), pt(800, 40), pt(1000, 50)]);
const cheap = type("cheap", 0.2, [pt(100, 15), pt(200, 30), pt(400, 60), pt(600, 100), pt(800, 150), pt(1000, 200)]);
const types = [fast, cheap];
const setting: PoolSetting = {
  types,
  model: "m",
  qosMs: 50,
  base: 0,
  coefficients: heterogeneityCoefficients(types, "m", 0, 1000),
  safeguard: 0.02,
  mix: { kind: "kairos-production" },
  queries: 4000,
  target: 0.99,
};

describe("the Kairos pool simulator", () => {
  it("meets QoS for nearly every query at a low rate, and sends the large queries to the type that meets QoS for them", () => {
    // At 1 query/s two large queries still meet at the one fast instance now and then (a few in 4000).
    const r = simulatePool(setting, [1, 4], "kairos", 1, 1);
    expect(r.meetShare).toBeGreaterThanOrEqual(0.999);
    expect(r.stoppedEarly).toBe(false);
    const [f, c] = r.perType;
    expect((f?.queries ?? 0) + (c?.queries ?? 0)).toBe(4000);
    expect(f?.meanBatch ?? 0).toBeGreaterThan(2 * (c?.meanBatch ?? 0));
    expect(c?.meanMs ?? Number.POSITIVE_INFINITY).toBeLessThan(50);
  });

  it("stops a run once more than 1 - target of its queries have missed QoS", () => {
    const r = simulatePool(setting, [1, 0], "fcfs", 10_000, 1);
    expect(r.stoppedEarly).toBe(true);
    expect(r.meetShare).toBeLessThan(0.99);
  });

  it("throughput at QoS: the matching serves more than FCFS on the same mixed pool, and a pool no rate suits serves 0", () => {
    const ub = upperBound({ types, model: "m", qosMs: 50, batches: [100, 300, 700] });
    const kairos = throughputAtQos(setting, [1, 4], "kairos", ub.of([1, 4]), 3);
    const fcfs = throughputAtQos(setting, [1, 4], "fcfs", ub.of([1, 4]), 3);
    expect(kairos).toBeGreaterThan(fcfs);
    expect(kairos).toBeLessThanOrEqual(ub.of([1, 4]) * 1.1);
    // The cheap type alone misses QoS for every query above batch 200 (over 25 % of the mix).
    expect(throughputAtQos(setting, [0, 4], "fcfs", 100, 3)).toBe(0);
  });
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function scenarioFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "ig-kairos-"));
  dirs.push(dir);
  writeFileSync(
    join(dir, "profiles.csv"),
    "instance_type,model,batch,mean_ms,p50_ms,p99_ms,samples\nfast,m,1000,10,10,10,9\nslow,m,1000,90,90,90,9\n",
  );
  const file = join(dir, "s.yaml");
  writeFileSync(file, text);
  return file;
}
const GOOD = `kind: kairos
description: two types
catalogue:
  profiles: profiles.csv
  types:
    - { name: fast, pricePerHour: 1, maxCount: 2 }
    - { name: slow, pricePerHour: 0.1, maxCount: 4 }
model: m
qosMs: 50
budgetPerHour: 1.4
queries: 2000
monitoredQueries: 500
search: { maxEvaluations: 2, queries: 1000 }
seeds: [1]
`;
const capture = () => {
  let out = "";
  let err = "";
  const stderr = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      err += chunk.toString();
      done();
    },
  });
  const io: CliIO = { stdout: { write: (s: string) => (out += s) }, stderr };
  return { io, text: () => ({ out, err }) };
};

describe("kairos scenarios", () => {
  it("the named ones load, with the Kairos artifact's profiles read by path", () => {
    const s = loadKairosScenario(join(scenariosDir(), "kairos-rm2.yaml"), defaultProfilesDir());
    expect(s.types.map((t) => t.name)).toEqual(["g4dn.xlarge", "c5n.2xlarge", "r5n.large", "t3.xlarge"]);
    expect(s.profilesFile).toMatch(/shared\/profiles\/kairos-aws-4types\.csv$/);
    expect([s.qosMs, s.budgetPerHour, s.target, s.queries]).toEqual([350, 2.5, 0.99, 20_000]);
  });

  it("a bad field, an unknown type and a missing model are errors that say where", () => {
    const errorOf = (text: string) => {
      try {
        loadKairosScenario(scenarioFile(text), "/nonexistent");
        return "";
      } catch (err) {
        if (!(err instanceof ScenarioError)) throw err;
        return err.problems.join("\n");
      }
    };
    expect(errorOf(GOOD.replace("qosMs: 50", "qosMs: -5"))).toMatch(/^qosMs: /m);
    expect(errorOf(GOOD.replace("maxCount: 4", "maxCount: 4, gpus: 1"))).toContain("catalogue.types[1].gpus: unknown field");
    expect(errorOf(GOOD.replace("name: slow", "name: tiny"))).toMatch(/profile table profiles.csv has no rows for it/);
    expect(errorOf(GOOD.replace("model: m", "model: bert"))).toMatch(/no profile for model bert/);
    expect(errorOf(GOOD.replace("profiles: profiles.csv", "profiles: nope.csv"))).toMatch(/catalogue.profiles: no file nope.csv/);
  });

  it("the CLI runs one and prints every policy's throughput; a budget below the base type's price exits 2 and says so", async () => {
    const ok = capture();
    expect(await main(["--scenario", scenarioFile(GOOD), "--out", mkdtempSync(join(tmpdir(), "ig-kairos-out-"))], ok.io)).toBe(0);
    for (const p of ["infergrid", "kairos", "homogeneous", "kairos-fcfs", "random"])
      expect(ok.text().out).toMatch(new RegExp(`^\\| ${p} \\|`, "m"));
    const poor = capture();
    expect(await main(["--scenario", scenarioFile(GOOD.replace("budgetPerHour: 1.4", "budgetPerHour: 0.5"))], poor.io)).toBe(2);
    expect(poor.text().err).toMatch(/budget 0.5 USD\/h buys no configuration/);
    const badPolicy = capture();
    expect(await main(["--scenario", scenarioFile(GOOD), "--policies", "swayam"], badPolicy.io)).toBe(2);
    expect(badPolicy.text().err).toMatch(/unknown policy 'swayam' for a kairos scenario/);
  });
});
