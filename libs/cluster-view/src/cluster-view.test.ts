import { backend, consoleView, control } from "@infergrid/proto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ClusterView } from "./cluster-view.js";
import { updateJson } from "./update-json.js";

const S = backend.BackendState;

function backendBeat(id: string, service: string, state: backend.BackendState, job = ""): control.Heartbeat {
  return control.Heartbeat.create({
    role: control.Role.ROLE_BACKEND,
    id,
    address: `127.0.0.1:${id.length}`,
    backend: backend.BackendReport.create({ backendId: id, state, service, job, cores: 2 }),
  });
}

function entry(name: string, ids: string[], sloMs = 100): control.ServiceEntry {
  return control.ServiceEntry.create({
    spec: control.ServiceSpec.create({ name, sla: control.Sla.create({ latencyThresholdMs: sloMs, percentile: 99 }) }),
    backends: ids.map((backendId) => control.BackendRef.create({ backendId })),
    minWarm: 1,
  });
}

function load(service: string, frontendId: string, at: number, fields: Partial<control.LoadReport.$Properties>): control.LoadReport {
  return control.LoadReport.create({ service, frontendId, windowStartUnixMs: at - 1000, windowEndUnixMs: at, ...fields });
}

function viewOf(update: consoleView.ConsoleUpdate.$Properties, name: string): consoleView.ServiceView.$Properties {
  const s = update.services?.find((x) => x.name === name);
  if (!s) throw new Error(`no view of ${name}`);
  return s;
}

describe("ClusterView", () => {
  it("shows each listed backend's state in list order, and a backend that stops beating as missing", () => {
    const v = new ClusterView({ staleMs: 3000 });
    v.onServiceEntry("svc", entry("svc", ["b2", "b1", "b3"]));
    v.onHeartbeat(backendBeat("b1", "svc", S.BACKEND_STATE_BUSY), 0);
    v.onHeartbeat(backendBeat("b2", "svc", S.BACKEND_STATE_WARM_IDLE), 0);
    v.onHeartbeat(backendBeat("b3", "svc", S.BACKEND_STATE_PROVISIONING), 0);
    v.onHeartbeat(backendBeat("b4", "", S.BACKEND_STATE_COLD), 0);
    v.onHeartbeat(backendBeat("b5", "", S.BACKEND_STATE_COLD, "job-a"), 0);
    let u = v.update(1000, "all");
    expect(viewOf(u, "svc").backends?.map((b) => [b.id, b.state])).toEqual([
      ["b2", "warm"],
      ["b1", "busy"],
      ["b3", "provisioning"],
    ]);
    expect(u.cluster?.backends).toBe(5);
    expect(u.cluster?.freeBackends).toBe(1);
    expect(u.cluster?.loanedBackends).toBe(1);
    expect(u.cluster?.pool?.map((b) => [b.id, b.state])).toEqual([
      ["b4", "cold"],
      ["b5", "loaned"],
    ]);
    // b1 goes quiet; the others keep beating.
    for (const id of ["b2", "b3", "b4", "b5"])
      v.onHeartbeat(backendBeat(id, id === "b4" || id === "b5" ? "" : "svc", S.BACKEND_STATE_WARM_IDLE), 3500);
    u = v.update(3600, "all");
    expect(viewOf(u, "svc").backends?.find((b) => b.id === "b1")?.state).toBe("missing");
    expect(u.cluster?.backends).toBe(4);
  });

  it("adds the frontends' reports up: counts since start, the rate of now, the agreed n and the worst p99", () => {
    const v = new ClusterView();
    v.onServiceEntry("svc", entry("svc", ["b1", "b2", "b3"]));
    v.onLoadReport(
      load("svc", "f1", 1000, {
        arrivals: 50,
        completed: 48,
        withinSlo: 47,
        failed: 1,
        latencyP50Ms: 10,
        latencyP99Ms: 90,
        backendsInUse: 2,
      }),
      1000,
    );
    v.onLoadReport(
      load("svc", "f2", 1000, { arrivals: 30, completed: 30, withinSlo: 30, latencyP50Ms: 20, latencyP99Ms: 40, backendsInUse: 2 }),
      1000,
    );
    v.onLoadReport(
      load("svc", "f3", 1000, { arrivals: 20, completed: 20, withinSlo: 20, latencyP50Ms: 20, latencyP99Ms: 30, backendsInUse: 3 }),
      1000,
    );
    const s = viewOf(v.update(1100, "all"), "svc");
    expect(s.requests).toBe(100);
    expect(s.completed).toBe(98);
    expect(s.withinSlo).toBe(97);
    expect(s.failed).toBe(1);
    expect(s.ratePerS).toBeCloseTo(100, 9);
    expect(s.agreedN).toBe(2);
    expect(s.maxN).toBe(3);
    expect(s.p99Ms).toBe(90);
    expect(s.p50Ms).toBeCloseTo((48 * 10 + 30 * 20 + 20 * 20) / 98, 9);
    expect(s.frontends?.map((f) => f.id)).toEqual(["f1", "f2", "f3"]);
  });

  it("drops stale reports from the values of now but keeps every report in the counts", () => {
    const v = new ClusterView({ reportFreshMs: 5000 });
    v.onServiceEntry("svc", entry("svc", []));
    v.onLoadReport(
      load("svc", "f1", 1000, { arrivals: 10, completed: 10, withinSlo: 10, backendsInUse: 4, slaWindows: 5, slaCompliantWindows: 4 }),
      1000,
    );
    const s = viewOf(v.update(7000, "all"), "svc");
    expect(s.requests).toBe(10);
    expect(s.ratePerS).toBe(0);
    expect(s.agreedN).toBe(0);
    expect(s.slaWindows).toBe(5);
    expect(s.slaCompliantWindows).toBe(4);
  });

  it("takes one point per sample with that interval's violations and drops, and sends only the newest after the first update", () => {
    const v = new ClusterView({ sampleMs: 1000 });
    v.onServiceEntry("svc", entry("svc", ["b1"]));
    v.onLoadReport(load("svc", "f1", 1000, { arrivals: 10, completed: 10, withinSlo: 7, failed: 2, latencyP99Ms: 120 }), 1000);
    v.sample(1000);
    v.onLoadReport(load("svc", "f1", 2000, { arrivals: 10, completed: 10, withinSlo: 10 }), 2000);
    v.sample(2000);
    v.sample(3000);
    const all = viewOf(v.update(3000, "all"), "svc").series ?? [];
    expect(all.map((p) => [p.violations, p.drops, p.hasLatency ?? false])).toEqual([
      [3, 2, true],
      [0, 0, true],
      [0, 0, false],
    ]);
    expect(all[0]?.p99Ms).toBe(120);
    const latest = viewOf(v.update(3000, "latest"), "svc").series ?? [];
    expect(latest).toHaveLength(1);
    expect(latest[0]?.atUnixMs).toBe(3000);
  });

  it("keeps only the history asked for", () => {
    const v = new ClusterView({ sampleMs: 1000, historyMs: 5000 });
    v.onServiceEntry("svc", entry("svc", []));
    for (let t = 0; t <= 20_000; t += 1000) v.sample(t);
    const u = v.update(20_000, "all");
    expect(viewOf(u, "svc").series?.map((p) => p.atUnixMs)).toEqual([15_000, 16_000, 17_000, 18_000, 19_000, 20_000]);
    expect(u.cluster?.series).toHaveLength(6);
  });

  it("shows the forecast's band for the next step while it is fresh", () => {
    const v = new ClusterView();
    v.onServiceEntry("svc", entry("svc", []));
    v.onForecast(
      control.Forecast.create({
        service: "svc",
        stepMs: 10_000,
        steps: 3,
        model: "nhits",
        quantiles: [
          { quantile: 0.9, ratePerS: [30, 31, 32] },
          { quantile: 0.1, ratePerS: [10, 11, 12] },
          { quantile: 0.6, ratePerS: [22, 23, 24] },
          { quantile: 0.5, ratePerS: [20, 21, 22] },
        ],
      }),
      0,
    );
    const s = viewOf(v.update(1000, "all"), "svc");
    expect(s.forecast).toEqual({ low: 10, mid: 20, high: 30, lowQuantile: 0.1, highQuantile: 0.9 });
    expect(s.forecastModel).toBe("nhits");
    expect(viewOf(v.update(40_000, "all"), "svc").forecast).toBeUndefined();
  });

  it("reports the allocator's last plan and each service's share", () => {
    const v = new ClusterView();
    v.onServiceEntry("svc", entry("svc", ["b1", "b2"]));
    v.onPlan(
      control.AllocationPlan.create({
        seq: 7,
        issuedAtUnixMs: 5000,
        objective: "attainment",
        objectiveValue: 1.5,
        objectiveUpperBound: 1.6,
        solveMs: 12,
        solvedAtUnixMs: 4000,
        poolSize: 4,
        freeBackends: 2,
        services: [{ service: "svc", maxBackends: 2, share: 3, minWarm: 1, predictedRatePerS: 40, utility: 0.75 }],
      }),
    );
    // An older plan arriving late does not replace a newer one.
    v.onPlan(control.AllocationPlan.create({ seq: 6, issuedAtUnixMs: 4000, objective: "old" }));
    const u = v.update(6000, "all");
    expect(u.cluster?.plan?.objective).toBe("attainment");
    expect(u.cluster?.plan?.objectiveValue).toBe(1.5);
    expect(u.cluster?.plan?.solveMs).toBe(12);
    expect(u.cluster?.plan?.shares).toEqual([
      { service: "svc", share: 3, maxBackends: 2, minWarm: 1, predictedRatePerS: 40, utility: 0.75 },
    ]);
    expect(viewOf(u, "svc").share).toBe(3);
    expect(viewOf(u, "svc").plannedUtility).toBe(0.75);
  });

  it("lists live members (not backends), forgets a draining one, and keeps the latest pool events", () => {
    const v = new ClusterView({ events: 2 });
    v.onHeartbeat(control.Heartbeat.create({ role: control.Role.ROLE_FRONTEND, id: "f1", address: "a:1" }), 0);
    v.onHeartbeat(control.Heartbeat.create({ role: control.Role.ROLE_ALLOCATOR, id: "alloc", address: "a:2" }), 0);
    v.onHeartbeat(control.Heartbeat.create({ role: control.Role.ROLE_FRONTEND, id: "f2", address: "a:3" }), 0);
    v.onHeartbeat(control.Heartbeat.create({ role: control.Role.ROLE_FRONTEND, id: "f2", draining: true }), 500);
    for (const [k, id] of [
      [control.PoolEventKind.POOL_EVENT_KIND_JOINED, "b1"],
      [control.PoolEventKind.POOL_EVENT_KIND_ASSIGNED, "b1"],
      [control.PoolEventKind.POOL_EVENT_KIND_LEFT, "b1"],
    ] as const)
      v.onPoolEvent(control.PoolEvent.create({ kind: k, backendId: id }));
    const u = v.update(1000, "all");
    expect(u.cluster?.members?.map((m) => [m.role, m.id])).toEqual([
      ["allocator", "alloc"],
      ["frontend", "f1"],
    ]);
    expect(u.cluster?.events?.map((e) => e.kind)).toEqual(["assigned", "left"]);
  });

  it("drops what it heard of a service the registry never had, once it has been quiet for a while", () => {
    const v = new ClusterView({ forgetMs: 10_000 });
    v.onLoadReport(load("ghost", "f1", 1000, { arrivals: 5 }), 1000);
    v.sample(2000);
    v.onServiceEntry("ghost", entry("ghost", []));
    expect(viewOf(v.update(2000, "all"), "ghost").requests).toBe(5);
    const w = new ClusterView({ forgetMs: 10_000 });
    w.onLoadReport(load("ghost", "f1", 1000, { arrivals: 5 }), 1000);
    w.sample(20_000);
    w.onServiceEntry("ghost", entry("ghost", []));
    expect(viewOf(w.update(20_000, "all"), "ghost").requests).toBe(0);
  });

  it("holds a bounded number of reporting frontends and unlisted services, whatever the reports invent", () => {
    const v = new ClusterView({ forgetMs: 10_000 });
    v.onServiceEntry("svc", entry("svc", []));
    // 150,000 invented frontend ids for an unlisted service took the console down (a spread past the stack's size).
    for (let i = 0; i < 150_000; i++) v.onLoadReport(load("ghost", `f${i}`, 1000, { arrivals: 1 }), 1000);
    expect(() => v.sample(2000)).not.toThrow();
    for (let i = 0; i < 2000; i++) v.onLoadReport(load(`ghost-${i}`, "f1", 1000, { arrivals: 1 }), 1000);
    // Bad names and ids are not held at all.
    v.onLoadReport(load("svc", "", 1000, { arrivals: 7 }), 1000);
    v.onLoadReport(load("Not A Name", "f1", 1000, { arrivals: 7 }), 1000);
    v.onServiceEntry("ghost", entry("ghost", []));
    // The first 1024 frontends' reports are counted, the rest dropped; 256 unlisted services are held.
    expect(viewOf(v.update(2000, "all"), "ghost").requests).toBe(1024);
    expect(viewOf(v.update(2000, "all"), "svc").requests).toBe(0);
    v.onServiceEntry("ghost-254", entry("ghost-254", []));
    v.onServiceEntry("ghost-255", entry("ghost-255", []));
    expect(viewOf(v.update(2000, "all"), "ghost-254").requests).toBe(1);
    expect(viewOf(v.update(2000, "all"), "ghost-255").requests).toBe(0);
  });

  it("forgets a deregistered service", () => {
    const v = new ClusterView();
    v.onServiceEntry("svc", entry("svc", []));
    v.onServiceEntry("svc", undefined);
    expect(v.update(0, "all").services).toEqual([]);
  });

  it("counts every arrival exactly once whatever the order of reports and samples (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ frontend: fc.constantFrom("f1", "f2", "f3"), arrivals: fc.nat(1000), sampleAfter: fc.boolean() }), {
          maxLength: 60,
        }),
        (steps) => {
          const v = new ClusterView();
          v.onServiceEntry("svc", entry("svc", []));
          let t = 0;
          let total = 0;
          for (const s of steps) {
            t += 100;
            v.onLoadReport(load("svc", s.frontend, t, { arrivals: s.arrivals }), t);
            total += s.arrivals;
            if (s.sampleAfter) v.sample(t);
          }
          return viewOf(v.update(t, "all"), "svc").requests === total;
        },
      ),
    );
  });

  it("encodes an update as proto3 JSON the page can read", () => {
    const v = new ClusterView();
    v.onServiceEntry("svc", entry("svc", ["b1"]));
    v.onHeartbeat(backendBeat("b1", "svc", S.BACKEND_STATE_BUSY), 0);
    v.sample(1000);
    const json = JSON.parse(updateJson(v.update(1000, "all"))) as { services: { name: string; backends: { state: string }[] }[] };
    expect(json.services[0]?.name).toBe("svc");
    expect(json.services[0]?.backends[0]?.state).toBe("busy");
    // The same bytes decode back through the generated message.
    expect(consoleView.ConsoleUpdate.fromObject(json).services[0]?.sloMs).toBe(100);
  });
});
