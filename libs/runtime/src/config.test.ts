import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigError, field, loadConfig } from "./config.js";

const schema = z.object({
  grpcPort: field.port(0),
  retryGapMs: field.ms(5),
  scaling: z.enum(["swayam", "static"]).default("swayam"),
  verbose: field.bool(false),
  peers: field.list([]),
});

describe("loadConfig", () => {
  it("reads defaults, then environment, then flags (flags win)", () => {
    expect(loadConfig(schema, { argv: [], env: {} })).toEqual({ grpcPort: 0, retryGapMs: 5, scaling: "swayam", verbose: false, peers: [] });
    const c = loadConfig(schema, {
      argv: ["--retry-gap-ms", "7", "--peers", "a, b"],
      env: { INFERGRID_GRPC_PORT: "9000", INFERGRID_RETRY_GAP_MS: "3", INFERGRID_VERBOSE: "yes" },
    });
    expect(c).toEqual({ grpcPort: 9000, retryGapMs: 7, scaling: "swayam", verbose: true, peers: ["a", "b"] });
  });

  it("names the flag, the variable and the bad value", () => {
    const bad = () => loadConfig(schema, { argv: ["--scaling", "magic"], env: { INFERGRID_GRPC_PORT: "99999" } });
    expect(bad).toThrow(ConfigError);
    try {
      bad();
    } catch (err) {
      const message = (err as Error).message;
      expect(message).toContain("--grpc-port / INFERGRID_GRPC_PORT");
      expect(message).toContain('(got "99999")');
      expect(message).toContain("--scaling / INFERGRID_SCALING");
      expect(message).toContain('(got "magic")');
    }
  });

  it("refuses an unknown flag and lists the known ones", () => {
    expect(() => loadConfig(schema, { argv: ["--grcp-port", "1"], env: {} })).toThrow(/Unknown option '--grcp-port'[\s\S]*--grpc-port/);
  });
});
