import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SERVICE_NODE_FLAGS } from "./node-flags.js";

describe("SERVICE_NODE_FLAGS", () => {
  it("are the flags the service images start node with", () => {
    const dockerfile = readFileSync(new URL("../../../infra/docker/Dockerfile", import.meta.url), "utf8");
    const cmd = dockerfile.split("\n").find((line) => line.startsWith("CMD "));
    expect(cmd).toBeDefined();
    expect(JSON.parse((cmd ?? "").slice(4))).toEqual(["node", ...SERVICE_NODE_FLAGS, "dist/main.js"]);
  });

  it("are accepted by this node (a misspelt V8 option would stop every service at start)", async () => {
    const { execFileSync } = await import("node:child_process");
    expect(execFileSync(process.execPath, [...SERVICE_NODE_FLAGS, "-e", "process.stdout.write('ok')"], { encoding: "utf8" })).toBe("ok");
  });
});
