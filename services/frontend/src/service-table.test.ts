import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { toView } from "./service-table.js";

function entry(spec: control.ServiceSpec.$Properties): control.ServiceEntry {
  return control.ServiceEntry.create({
    spec,
    backends: [
      { backendId: "b1", address: "127.0.0.1:1" },
      { backendId: "", address: "127.0.0.1:2" },
    ],
    version: 3,
    minWarm: 2,
  });
}

describe("toView: a registry entry as the frontend uses it, defaults applied once", () => {
  it("fills what the spec leaves out from Swayam's defaults", () => {
    const view = toView("svc", entry({ name: "svc", sla: { latencyThresholdMs: 300 } }));
    expect(typeof view).toBe("object");
    if (typeof view === "string") return;
    expect(view.sla).toEqual({ rtMaxMs: 300, slMin: 0.99, burstFactor: 2 });
    expect(view.pruneLate).toBe(false);
    expect(view.initialBackends).toBe(1);
    expect(view.serviceTimePrior).toBeUndefined();
    expect(view.backends).toEqual([{ backendId: "b1", address: "127.0.0.1:1", instanceType: "" }]); // an entry without an id is skipped
    expect(view.pricing).toBeUndefined();
    expect(view.version).toBe(3);
    expect(view.minWarm).toBe(2);
  });

  it("keeps what the spec sets, and an emulated model's profile becomes the scaler's prior", () => {
    const view = toView(
      "svc",
      entry({
        name: "svc",
        sla: { latencyThresholdMs: 500, percentile: 95, burstFactor: 1.5 },
        pruneLate: true,
        initialBackends: 4,
        model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.3, locMs: 10, scaleMs: 20 } },
      }),
    );
    if (typeof view === "string") throw new Error(view);
    expect(view.sla).toEqual({ rtMaxMs: 500, slMin: 0.95, burstFactor: 1.5 });
    expect(view.pruneLate).toBe(true);
    expect(view.initialBackends).toBe(4);
    expect(view.serviceTimePrior).toEqual({ shape: 0.3, loc: 10, scale: 20 });
  });

  it("refuses an entry with no usable latency threshold or percentile, saying which field", () => {
    expect(toView("svc", entry({ name: "svc" }))).toMatch(/latencyThresholdMs must be positive/);
    expect(toView("svc", entry({ name: "svc", sla: { latencyThresholdMs: 100, percentile: 120 } }))).toMatch(/percentile must be in/);
  });

  it("prices requests per instance type when the model has per-type profiles, and refuses bad ones by index", () => {
    const pts = (ms: number[]) => ms.map((m, i) => ({ batch: (i + 1) * 100, meanMs: m, p99Ms: m }));
    const model = (profiles: control.InstanceProfile.$Properties[]) => ({
      name: "svc",
      sla: { latencyThresholdMs: 100 },
      model: { kind: control.ModelKind.MODEL_KIND_EMULATED, instanceProfiles: profiles },
    });
    const view = toView(
      "svc",
      entry(
        model([
          { instanceType: "gpu", points: pts([10, 20]) },
          { instanceType: "cpu", points: pts([40, 200]) },
        ]),
      ),
    );
    if (typeof view === "string") throw new Error(view);
    expect(view.pricing?.coefficients.get("gpu")).toBe(1);
    expect(view.pricing?.coefficients.get("cpu")).toBeCloseTo(0.1);
    expect(view.pricing?.qosMs).toBe(100);
    expect(toView("svc", entry(model([{ instanceType: "gpu", points: [] }])))).toMatch(/instanceProfiles\[0\]\.points: at least one point/);
    expect(
      toView(
        "svc",
        entry(
          model([
            { instanceType: "gpu", points: pts([10]) },
            { instanceType: "gpu", points: pts([10]) },
          ]),
        ),
      ),
    ).toMatch(/instanceProfiles\[1\]\.instanceType: gpu given twice/);
    expect(toView("svc", entry(model([{ instanceType: "gpu", points: [{ batch: 10, meanMs: 5, p99Ms: 4 }] }])))).toMatch(
      /points\[0\]\.p99_ms must be a finite number >= mean_ms \(5\) \(got 4\)/,
    );
  });
});
