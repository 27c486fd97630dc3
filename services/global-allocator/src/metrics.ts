import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { Allocator } from "./allocator.js";

export function allocatorMetrics(registry: Registry, allocator: Allocator, poolTarget: () => number | undefined, now: () => number) {
  new Gauge({
    name: "infergrid_allocator_pool_target_backends",
    help: "Pool size last asked of the platform (absent without a pool actuator)",
    registers: [registry],
    collect() {
      const target = poolTarget();
      if (target === undefined) this.reset();
      else this.set(target);
    },
  });
  new Gauge({
    name: "infergrid_allocator_pool_backends",
    help: "Live backends in the pool (free and assigned)",
    registers: [registry],
    collect() {
      this.set(allocator.snapshot(now()).poolSize);
    },
  });
  new Gauge({
    name: "infergrid_allocator_free_backends",
    help: "Live backends in no service's list",
    registers: [registry],
    collect() {
      this.set(allocator.snapshot(now()).free);
    },
  });
  new Gauge({
    name: "infergrid_allocator_service_list_length",
    help: "Length of each service's ordered backend list",
    labelNames: ["service"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [service, length] of allocator.snapshot(now()).listLengths) this.set({ service }, length);
    },
  });
  new Gauge({
    name: "infergrid_allocator_loaned_backends",
    help: "Backends loaned to best-effort jobs, those being returned included",
    registers: [registry],
    collect() {
      this.set(allocator.loanedCount());
    },
  });
  new Gauge({
    name: "infergrid_allocator_job_items",
    help: "Per best-effort job: items it has, items done, items redone (0 unless something is wrong)",
    labelNames: ["job", "what"],
    registers: [registry],
    collect() {
      this.reset();
      for (const j of allocator.jobsOrNone()) {
        const job = j.spec?.name ?? "";
        this.set({ job, what: "total" }, j.spec?.items ?? 0);
        this.set({ job, what: "done" }, j.itemsDone);
        this.set({ job, what: "redone" }, j.itemsRedone);
      }
    },
  });
  new Gauge({
    name: "infergrid_allocator_job_preemptions",
    help: "Per best-effort job: reclaims that interrupted it",
    labelNames: ["job"],
    registers: [registry],
    collect() {
      this.reset();
      for (const j of allocator.jobsOrNone()) this.set({ job: j.spec?.name ?? "" }, j.preemptions);
    },
  });
  const coreSeconds = new Counter({
    name: "infergrid_allocator_core_seconds_total",
    help: "Cores held by each service's backends over time, as their heartbeats report their sizes (its cost)",
    labelNames: ["service"],
    registers: [registry],
  });
  new Gauge({
    name: "infergrid_allocator_service_cores",
    help: "Cores each service's live backends hold now",
    labelNames: ["service"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [service, cores] of allocator.coresByService(now())) this.set({ service }, cores);
    },
  });
  let accruedAt: number | undefined;
  return {
    /** Adds each service's cores x the time since the last call to its core-seconds (call every control step). */
    accrueCoreSeconds(at: number): void {
      if (accruedAt !== undefined && at > accruedAt)
        for (const [service, cores] of allocator.coresByService(at)) coreSeconds.inc({ service }, (cores * (at - accruedAt)) / 1000);
      accruedAt = at;
    },
    backendResizes: new Counter({
      name: "infergrid_allocator_backend_resizes_total",
      help: "In-place resizes the Themis controller asked of backends: up/down (cores), batch (only the batch), failed",
      labelNames: ["what"],
      registers: [registry],
    }),
    poolResizes: new Counter({
      name: "infergrid_allocator_pool_resizes_total",
      help: "Resizes of the backend pool asked of the platform",
      labelNames: ["direction"],
      registers: [registry],
    }),
    loadReports: new Counter({
      name: "infergrid_allocator_load_reports_total",
      help: "Frontends' load reports received, by outcome: accepted, invalid, refused (not sealed by the frontend it names, with --signed-heartbeats, or a repeat)",
      labelNames: ["outcome"],
      registers: [registry],
    }),
    reconcileSeconds: new Histogram({
      name: "infergrid_allocator_reconcile_seconds",
      help: "Time one control step took (plan and registry writes)",
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      registers: [registry],
    }),
  };
}
