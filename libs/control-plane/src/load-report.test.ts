import { describe, expect, it } from "vitest";
import { HEARTBEAT_MAX_SKEW_MS } from "./heartbeat-signature.js";
import { loadWindowProblem } from "./load-report.js";

describe("loadWindowProblem", () => {
  const now = 1_000_000;
  it("accepts a window that ends now, or within the clock skew heartbeats are allowed", () => {
    expect(loadWindowProblem({ windowStartUnixMs: now - 250, windowEndUnixMs: now }, now)).toBeUndefined();
    expect(loadWindowProblem({ windowStartUnixMs: now, windowEndUnixMs: now + HEARTBEAT_MAX_SKEW_MS }, now)).toBeUndefined();
  });

  it("names what is wrong with a window that is missing, backwards or in the future", () => {
    expect(loadWindowProblem({ windowStartUnixMs: 0, windowEndUnixMs: 0 }, now)).toMatch(/no window/);
    expect(loadWindowProblem({ windowStartUnixMs: -5, windowEndUnixMs: now }, now)).toMatch(/no window/);
    expect(loadWindowProblem({ windowStartUnixMs: now, windowEndUnixMs: now - 1 }, now)).toMatch(
      /ends \(999999\) before it starts \(1000000\)/,
    );
    expect(loadWindowProblem({ windowStartUnixMs: now, windowEndUnixMs: now + HEARTBEAT_MAX_SKEW_MS + 1 }, now)).toMatch(
      /30001 ms in the future/,
    );
  });
});
