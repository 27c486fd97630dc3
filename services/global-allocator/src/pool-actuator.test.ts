import { LocalProcessActuator, TypedPools } from "@infergrid/pool-actuator";
import { createLogger, loadConfig } from "@infergrid/runtime";
import { describe, expect, it } from "vitest";
import { allocatorConfig } from "./config.js";
import { createPoolActuator } from "./pool-actuator.js";

const logger = createLogger("test", "pool-actuator-test", "silent");
const build = (env: Record<string, string>) => createPoolActuator(loadConfig(allocatorConfig, { argv: [], env }), "alloc-1", logger);

// Construction only: nothing is started until a pool is scaled (the processes are tested in libs/pool-actuator).
describe("createPoolActuator", () => {
  it("keeps today's single pool by default", () => {
    expect(build({})).toBeUndefined();
    expect(build({ INFERGRID_POOL_ACTUATOR: "local" })).toBeInstanceOf(LocalProcessActuator);
  });

  it("builds one local pool per type, in the given order, capped at the price list's maxCount", async () => {
    const pools = build({
      INFERGRID_POOL_ACTUATOR: "local",
      INFERGRID_POOL_TYPES: "r5n.large,g4dn.xlarge",
      INFERGRID_INSTANCE_TYPES:
        '[{"name":"g4dn.xlarge","pricePerHour":0.526,"maxCount":2},{"name":"r5n.large","pricePerHour":0.149,"maxCount":9}]',
    });
    expect(pools).toBeInstanceOf(TypedPools);
    const typed = pools as TypedPools;
    expect(typed.kind).toBe("local");
    expect(typed.types()).toEqual(["r5n.large", "g4dn.xlarge"]);
    await expect(typed.scaleTypesTo({ "g4dn.xlarge": 3 })).rejects.toThrow(/g4dn.xlarge may hold at most 2/);
    expect(await typed.currentSizes()).toEqual(
      new Map([
        ["r5n.large", 0],
        ["g4dn.xlarge", 0],
      ]),
    );
  });

  it("resolves the control token for the kubernetes pool (which tells resized backends their size) and names a bad setting", () => {
    expect(() =>
      build({ INFERGRID_POOL_ACTUATOR: "kubernetes", INFERGRID_CONTROL_TOKEN: "a", INFERGRID_CONTROL_TOKEN_FILE: "/nonexistent" }),
    ).toThrow(/--control-token \/ INFERGRID_CONTROL_TOKEN and --control-token-file \/ INFERGRID_CONTROL_TOKEN_FILE: give one, not both/);
    expect(() => build({ INFERGRID_POOL_ACTUATOR: "kubernetes", INFERGRID_CONTROL_TOKEN_FILE: "/nonexistent/token" })).toThrow(
      /--control-token-file \/ INFERGRID_CONTROL_TOKEN_FILE: cannot read \/nonexistent\/token/,
    );
  });
});
