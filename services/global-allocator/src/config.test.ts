import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { allocatorConfig, configProblems, parseInstanceTypes, parsePoolTypes } from "./config.js";

const load = (env: Record<string, string>) => loadConfig(allocatorConfig, { argv: [], env });
const prices = '[{"name":"g4dn.xlarge","pricePerHour":0.526,"maxCount":4},{"name":"r5n.large","pricePerHour":0.149,"maxCount":10}]';

describe("--instance-types", () => {
  it("is undefined by default; takes a JSON list inline", () => {
    expect(load({}).instanceTypes).toBeUndefined();
    expect(load({ INFERGRID_INSTANCE_TYPES: prices }).instanceTypes).toEqual([
      { name: "g4dn.xlarge", pricePerHour: 0.526, maxCount: 4 },
      { name: "r5n.large", pricePerHour: 0.149, maxCount: 10 },
    ]);
  });

  it("reads a file: a list, or a Kairos catalogue whose types it takes", () => {
    const dir = mkdtempSync(join(tmpdir(), "allocator-config-"));
    writeFileSync(join(dir, "list.json"), prices);
    writeFileSync(join(dir, "catalogue.json"), JSON.stringify({ profiles: "kairos-aws-4types.csv", types: JSON.parse(prices) }));
    expect(load({ INFERGRID_INSTANCE_TYPES: join(dir, "list.json") }).instanceTypes).toHaveLength(2);
    expect(parseInstanceTypes(join(dir, "catalogue.json")).map((t) => t.name)).toEqual(["g4dn.xlarge", "r5n.large"]);
    expect(() => parseInstanceTypes(join(dir, "missing.json"))).toThrow(/cannot read the price list file .*missing\.json/);
  });

  it("refuses a bad list with a message naming the option and the entry", () => {
    const bad = (value: string) => {
      try {
        load({ INFERGRID_INSTANCE_TYPES: value });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error("accepted");
    };
    expect(bad('[{"name":"a","pricePerHour":0,"maxCount":1}]')).toMatch(
      /--instance-types \/ INFERGRID_INSTANCE_TYPES: .*\[0\]\.pricePerHour/,
    );
    expect(bad('[{"name":"a","pricePerHour":1,"maxCount":1.5}]')).toMatch(/\[0\]\.maxCount/);
    expect(bad('[{"name":"a","pricePerHour":1,"maxCount":1,"price":2}]')).toMatch(/\[0\]/);
    expect(bad('[{"name":"a","pricePerHour":1,"maxCount":1},{"name":"a","pricePerHour":2,"maxCount":1}]')).toMatch(/distinct/);
    expect(bad("[]")).toMatch(/inline price list/);
    expect(bad("[{]")).toMatch(/the inline price list is not JSON/);
  });
});

describe("--pool-types", () => {
  it("is one pool by default; parses <type>[=<workload>] entries", () => {
    expect(load({}).poolTypes).toEqual([]);
    expect(load({ INFERGRID_POOL_TYPES: "g4dn.xlarge=deployment/backend-g4dn, r5n.large=StatefulSet/backend-r5n" }).poolTypes).toEqual([
      { instanceType: "g4dn.xlarge", workload: "deployment/backend-g4dn" },
      { instanceType: "r5n.large", workload: "StatefulSet/backend-r5n" },
    ]);
    expect(parsePoolTypes(["g4dn.xlarge", "r5n.large"])).toEqual([{ instanceType: "g4dn.xlarge" }, { instanceType: "r5n.large" }]);
  });

  it("refuses empty types, bad or shared workloads, a type given twice", () => {
    expect(() => parsePoolTypes(["=deployment/x"])).toThrow(/the instance type is empty/);
    expect(() => parsePoolTypes(["a=pod/x"])).toThrow(/deployment\/<name> or statefulset\/<name>/);
    expect(() => parsePoolTypes(["a", "a"])).toThrow(/instance type a is given two pools/);
    expect(() => parsePoolTypes(["a=deployment/x", "b=deployment/x"])).toThrow(/workload deployment\/x is given to two instance types/);
    expect(() => load({ INFERGRID_POOL_TYPES: "a=pod/x" })).toThrow(/--pool-types \/ INFERGRID_POOL_TYPES/);
  });

  it("configProblems: per-type pools need an actuator, its form, and types of the price list", () => {
    const c = (env: Record<string, string>) => configProblems(load(env));
    expect(c({})).toEqual([]);
    expect(c({ INFERGRID_POOL_TYPES: "a" })).toEqual(["--pool-types / INFERGRID_POOL_TYPES: needs --pool-actuator local or kubernetes"]);
    expect(c({ INFERGRID_POOL_ACTUATOR: "kubernetes", INFERGRID_POOL_TYPES: "g4dn.xlarge=deployment/g,r5n.large" })).toEqual([
      "--pool-types / INFERGRID_POOL_TYPES: with --pool-actuator kubernetes each entry is <type>=<workload>; r5n.large has no workload",
    ]);
    expect(c({ INFERGRID_POOL_ACTUATOR: "local", INFERGRID_POOL_TYPES: "g4dn.xlarge=deployment/g" })[0]).toMatch(
      /with --pool-actuator local entries are instance types only/,
    );
    expect(c({ INFERGRID_POOL_ACTUATOR: "local", INFERGRID_POOL_TYPES: "g4dn.xlarge,r5n.larg", INFERGRID_INSTANCE_TYPES: prices })).toEqual(
      ["--pool-types / INFERGRID_POOL_TYPES: instance type r5n.larg is not in --instance-types (it has: g4dn.xlarge, r5n.large)"],
    );
    expect(
      c({ INFERGRID_POOL_ACTUATOR: "local", INFERGRID_POOL_TYPES: "g4dn.xlarge,r5n.large", INFERGRID_INSTANCE_TYPES: prices }),
    ).toEqual([]);
    expect(c({ INFERGRID_BUDGET_PER_HOUR: "2.5" })).toEqual([
      "--budget-per-hour / INFERGRID_BUDGET_PER_HOUR: needs --instance-types (the budget buys instances at their prices)",
    ]);
    expect(c({ INFERGRID_BUDGET_PER_HOUR: "2.5", INFERGRID_INSTANCE_TYPES: prices })).toEqual([]);
    expect(() => load({ INFERGRID_BUDGET_PER_HOUR: "-1" })).toThrow(/--budget-per-hour \/ INFERGRID_BUDGET_PER_HOUR/);
    expect(c({ INFERGRID_POOL_BACKEND_NATS_USER: "pool-backends" })).toEqual([
      "--pool-backend-nats-user and --pool-backend-nats-pass-file: give both or neither",
    ]);
    expect(c({ INFERGRID_POOL_BACKEND_NATS_USER: "pool-backends", INFERGRID_POOL_BACKEND_NATS_PASS_FILE: "/run/pass" })).toEqual([]);
  });
});
