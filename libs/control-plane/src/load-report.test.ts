import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { HEARTBEAT_MAX_SKEW_MS } from "./heartbeat-signature.js";
import { LoadReportGate, loadWindowProblem } from "./load-report.js";

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

describe("LoadReportGate", () => {
  const now = 1_000_000;
  const report = (frontendId: string, service: string, end: number) =>
    control.LoadReport.create({ frontendId, service, windowStartUnixMs: end - 1000, windowEndUnixMs: end, arrivals: 10 });
  const raw = new Uint8Array();
  // The signature checks are HeartbeatVerifier's (heartbeat-signature.test.ts); here one that believes all but "mallory".
  const verifier = { loadReportProblem: (r: control.LoadReport) => (r.frontendId === "mallory" ? "unsigned" : undefined) };

  it("lets every report through without a verifier (no way to tell who sent it)", () => {
    const gate = new LoadReportGate();
    expect(gate.problem(report("fe-a", "resnet", now), raw)).toBeUndefined();
    expect(gate.problem(report("fe-a", "resnet", now), raw)).toBeUndefined();
    expect(gate.problem(report("mallory", "resnet", now), raw)).toBeUndefined();
  });

  it("with a verifier, refuses what it refuses, and a window not after the last one counted per frontend and service", () => {
    const gate = new LoadReportGate(verifier, () => now);
    expect(gate.problem(report("mallory", "resnet", now), raw)).toBe("unsigned");
    expect(gate.problem(report("fe-a", "X".repeat(100_000), now), raw)).toBe("its service name is not one a service may have");
    expect(gate.problem(report("fe-a", "resnet", now), raw)).toBeUndefined();
    expect(gate.problem(report("fe-a", "resnet", now), raw)).toBe(
      "its window ends at 1000000, not after the last one counted from this frontend (1000000)",
    );
    expect(gate.problem(report("fe-a", "resnet", now - 500), raw)).toMatch(/not after the last one counted/);
    // Another frontend, another service, and the next window are each counted.
    expect(gate.problem(report("fe-b", "resnet", now), raw)).toBeUndefined();
    expect(gate.problem(report("fe-a", "ocr", now), raw)).toBeUndefined();
    expect(gate.problem(report("fe-a", "resnet", now + 1000), raw)).toBeUndefined();
  });

  it("stays bounded: when full it forgets pairs too old to count, and remembers no new pair while all are fresh", () => {
    let clock = now;
    const gate = new LoadReportGate(verifier, () => clock, 3);
    for (const fe of ["fe-a", "fe-b", "fe-c"]) expect(gate.problem(report(fe, "resnet", now), raw)).toBeUndefined();
    // Full of fresh pairs: a fourth is counted but not remembered, so its repeat is counted too (it cannot push out
    // the pairs that guard real frontends)...
    expect(gate.problem(report("fe-d", "resnet", now), raw)).toBeUndefined();
    expect(gate.problem(report("fe-d", "resnet", now), raw)).toBeUndefined();
    expect(gate.problem(report("fe-a", "resnet", now), raw)).toMatch(/not after the last one counted/);
    // ...until the others are older than any report may be.
    clock = now + HEARTBEAT_MAX_SKEW_MS + 1;
    expect(gate.problem(report("fe-d", "resnet", clock), raw)).toBeUndefined();
    expect(gate.problem(report("fe-d", "resnet", clock), raw)).toMatch(/not after the last one counted/);
  });
});
