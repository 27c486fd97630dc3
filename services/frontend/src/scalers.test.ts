import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { frontendConfig } from "./config.js";
import { createScaler, sizedByThemis } from "./scalers.js";
import { type ServiceView, toView } from "./service-table.js";

const THEMIS = { gamma: 35, eps: 0, delta: 1.1, eta: 3.7 };

function view(model: control.ModelSpec.$Properties, backends: number, minWarm: number): ServiceView {
  const v = toView(
    "svc",
    control.ServiceEntry.create({
      spec: { name: "svc", sla: { latencyThresholdMs: 1000 }, initialBackends: 1, model },
      backends: Array.from({ length: backends }, (_, i) => ({ backendId: `b${i}`, address: `127.0.0.1:${1000 + i}` })),
      version: 1,
      minWarm,
    }),
  );
  if (typeof v === "string") throw new Error(v);
  return v;
}

const emulated = { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0, locMs: 40, scaleMs: 0 } };

describe("createScaler: the scaler is chosen per service from its spec", () => {
  it("uses the whole list for a service the allocator sizes with Themis, whatever the frontend's scaling", () => {
    for (const scaling of ["swayam", "static"] as const) {
      const scaler = createScaler(frontendConfig.parse({ scaling }));
      const themis = view({ ...emulated, themis: THEMIS }, 3, 1);
      expect(sizedByThemis(themis)).toBe(true);
      const out = scaler.decide(Date.now(), { service: themis });
      expect(out.n).toBe(3);
      expect(scaler.n).toBe(3);
      expect(out.reason).toContain("themis");
    }
  });

  it("keeps the configured scaler for any other service, and switches when the spec gains or loses the profile", () => {
    const scaler = createScaler(frontendConfig.parse({ scaling: "static" }));
    const plain = view(emulated, 3, 1);
    expect(sizedByThemis(plain)).toBe(false);
    // The static scaler: n = min_warm (at least the spec's initial size), not the list.
    expect(scaler.decide(Date.now(), { service: plain }).n).toBe(1);
    expect(scaler.decide(Date.now(), { service: view({ ...emulated, themis: THEMIS }, 3, 1) }).n).toBe(3);
    expect(scaler.decide(Date.now(), { service: plain }).n).toBe(1);
    expect(scaler.n).toBe(1);
  });
});
