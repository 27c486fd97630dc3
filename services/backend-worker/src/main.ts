import { heartbeatSigner, JobStore, type MemberHandle, ServiceRegistry, serveMember } from "@infergrid/control-plane";
import { SteadyClock } from "@infergrid/core";
import { deadlineMs } from "@infergrid/dataplane";
import { createModelRuntime } from "@infergrid/models";
import { BackendServingDefinition, backend, type DecodedExecuteRequest } from "@infergrid/proto";
import {
  addServiceWithMultiplex,
  type CommonConfig,
  GrpcStatusError,
  grpc,
  peerIdentity,
  requirePeerRole,
  resolveControlToken,
  runService,
  type ServiceContext,
  type StartedService,
  statusOf,
  unaryHandler,
} from "@infergrid/runtime";
import { BackendMachine } from "@infergrid/swayam";
import { Counter, Gauge, Histogram } from "prom-client";
import { ChildRuntime } from "./child-runtime.js";
import { type BackendConfig, backendConfig, sizeProblem } from "./config.js";
import { Harvester } from "./harvester.js";
import { nominalItemMs } from "./job-item.js";
import { JobRunner } from "./job-runner.js";
import { ownProfile, toModelSpec, Worker } from "./worker.js";

async function serveBackend(ctx: ServiceContext<BackendConfig & CommonConfig>): Promise<StartedService> {
  const { config, id, logger, metrics, nc } = ctx;
  const controlToken = resolveControlToken(config);
  if (controlToken === undefined) logger.info("no control token configured: Resize is disabled");
  let member: MemberHandle | undefined;
  let harvester: Harvester | undefined;
  // Its own intervals (idle T, holds, batch timeouts, hung items) on a clock a step of the wall clock does not
  // move: a step forward an hour decommissioned every idle backend at once. Callers' deadlines are carried onto it.
  const clock = new SteadyClock();
  const now = () => clock.now();
  const registry = await ServiceRegistry.open(nc, logger);
  const machine = new BackendMachine({
    concurrency: config.maxBatch > 1 ? config.maxBatch : config.concurrency,
    idleTimeoutMs: config.idleTimeoutMs,
    frontendWindowMs: config.tSetupMs,
  });
  const executed = new Counter({
    name: "infergrid_backend_requests_total",
    help: "Execute calls, by status (LATE_NOT_RUN: read after the caller's deadline, refused unrun; TOO_LONG_NOT_RUN: its rows alone take longer than its caller gives it, refused unrun)",
    labelNames: ["status"],
    registers: [metrics],
  });
  const parks = new Counter({
    name: "infergrid_backend_parks_total",
    help: "Park calls (late binding), by how they ended",
    labelNames: ["status"],
    registers: [metrics],
  });
  const holdsEnded = new Counter({
    name: "infergrid_backend_holds_total",
    help: "Slots held for parked requests, by how the hold ended (executed, released, expired)",
    labelNames: ["how"],
    registers: [metrics],
  });
  const batchSizes = new Histogram({
    name: "infergrid_backend_batch_size",
    help: "Requests per batch run as one model call",
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers: [metrics],
  });
  const resizes = new Counter({
    name: "infergrid_backend_resizes_total",
    help: "Resize calls, by outcome (ok, or the gRPC status name)",
    labelNames: ["outcome"],
    registers: [metrics],
  });
  const worker = new Worker(
    id,
    machine,
    config.onnxThreads,
    logger,
    {
      onHoldEnded: (how) => holdsEnded.inc({ how }),
      onBatch: (size) => batchSizes.observe(size),
      onLate: () => executed.inc({ status: "LATE_NOT_RUN" }),
      onTooLong: () => executed.inc({ status: "TOO_LONG_NOT_RUN" }),
      onCompute: (phase) => {
        if (phase === "start") harvester?.computeStarts();
        else harvester?.computeEnds();
      },
      onDecommissioned: () => {
        // The beat (cold, no service) is what returns this backend: the allocator announces it.
        member?.heartbeat.beat();
      },
    },
    {
      holdMs: config.holdMs,
      instanceType: config.instanceType,
      cores: config.cores,
      maxCores: config.maxCores,
      maxBatch: config.maxBatch,
      batchTimeoutMs: config.batchTimeoutMs,
      ...(controlToken === undefined ? {} : { controlToken }),
    },
    now,
    () => clock.wallOffset(),
  );
  const jobItems = new Counter({
    name: "infergrid_backend_job_items_total",
    help: "Best-effort job items this backend claimed while loaned (FaPES), by job and how they ended: done (recorded), redone (computed, but already recorded: should stay 0), skipped (found recorded before computing), abandoned (given back on a reclaim), failed",
    labelNames: ["job", "outcome"],
    registers: [metrics],
  });
  // Heartbeats and job results sealed with the backend's certificate: an allocator with --signed-heartbeats counts
  // no other result.
  const signer = heartbeatSigner(ctx);
  const jobStore = await JobStore.open(nc, logger, signer ? { signer } : {});
  const jobRunner = new JobRunner({
    backendId: id,
    items: jobStore,
    logger,
    createRuntime: (model, random) =>
      createModelRuntime(toModelSpec(model, config.onnxThreads, config.instanceType, config.cores), { random }),
    nominalItemMs: (spec) => nominalItemMs(spec.model, spec.itemBatch ?? 1, config.cores, ownProfile(spec.model, config.instanceType)),
    onItem: (job, outcome) => jobItems.inc({ job, outcome }),
    onJobChanged: () => member?.heartbeat.beat(),
    now,
  });
  if (config.harvest) {
    const harvestItems = new Counter({
      name: "infergrid_backend_harvest_items_total",
      help: "Best-effort job items this backend claimed in its idle time while serving (harvesting), by job and how they ended (as infergrid_backend_job_items_total)",
      labelNames: ["job", "outcome"],
      registers: [metrics],
    });
    harvester = new Harvester({
      now,
      backendId: id,
      store: jobStore,
      logger,
      createRuntime: (model, random) => new ChildRuntime(toModelSpec(model, config.onnxThreads, config.instanceType, config.cores), random),
      nominalItemMs: (spec) => nominalItemMs(spec.model, spec.itemBatch ?? 1, config.cores, ownProfile(spec.model, config.instanceType)),
      serving: () => {
        const state = worker.report().state;
        return (
          worker.service !== "" &&
          (state === backend.BackendState.BACKEND_STATE_WARM_IDLE || state === backend.BackendState.BACKEND_STATE_BUSY)
        );
      },
      gate: { resumeAfterMs: config.harvestResumeAfterMs, abandonAfterMs: config.harvestAbandonAfterMs },
      onItem: (job, outcome) => harvestItems.inc({ job, outcome }),
    });
    harvester.start();
  }
  const stopWatch = registry.watchAssignment(id, (a) => {
    worker.onAssignment(a);
    jobRunner.onAssignment(a);
  });
  new Gauge({
    name: "infergrid_backend_active_seconds_total",
    help: "Backend-seconds: time this backend was provisioning or warm (Swayam's resource metric)",
    registers: [metrics],
    collect() {
      this.set(worker.activeSeconds());
    },
  });

  // With --grpc-peer-roles only frontends may run, park, warm or release here, and only the allocator resize.
  const frontendsOnly = <Req, Res>(method: string, handler: grpc.handleUnaryCall<Req, Res>) =>
    requirePeerRole(config.grpcPeerRoles, ["frontend"], method, handler);
  member = await serveMember(ctx, {
    role: "backend",
    signer,
    maxReceiveMessageBytes: config.maxRequestBytes,
    heartbeatExtra: () => ({
      backend: { ...worker.report(), ...jobRunner.report(), ...harvester?.report() },
      instanceType: config.instanceType,
    }),
    // Every method also over the frontends' multiplexed streams (runtime multiplex.ts), the same handlers.
    register: (server) =>
      addServiceWithMultiplex(
        server,
        BackendServingDefinition,
        {
          Execute: frontendsOnly(
            "Execute",
            unaryHandler(logger, async (req: DecodedExecuteRequest, call) => {
              // A frontend speaks for itself only: the ids it calls with are what n_F counts.
              const caller = config.grpcPeerRoles ? peerIdentity(call) : undefined;
              if (caller && req.frontendId !== caller.id)
                throw new GrpcStatusError(
                  grpc.status.PERMISSION_DENIED,
                  `frontend_id ${JSON.stringify(req.frontendId)} is not the caller's identity ${JSON.stringify(caller.id)}`,
                );
              // grpc-js also emits "cancelled" when an answered call's stream closes: only a caller gone before the answer counts.
              let answered = false;
              const reply = await worker
                .execute({ ...req, callDeadline: deadlineMs(call.getDeadline()), caller: call.getPeer() }, (leave) =>
                  call.once("cancelled", () => {
                    if (!answered) leave();
                  }),
                )
                .finally(() => {
                  answered = true;
                });
              executed.inc({ status: backend.ExecuteStatus[reply.status ?? 0] ?? "UNKNOWN" });
              return reply;
            }),
          ),
          WarmUp: frontendsOnly(
            "WarmUp",
            unaryHandler(logger, async (req) => worker.warmUp(req)),
          ),
          Park: frontendsOnly(
            "Park",
            unaryHandler(logger, async (req, call) => {
              const withdrawn = new AbortController();
              call.on("cancelled", () => withdrawn.abort());
              const reply = await worker.park(req, withdrawn.signal);
              parks.inc({ status: backend.ParkStatus[reply.status ?? 0] ?? "UNKNOWN" });
              return reply;
            }),
          ),
          Release: frontendsOnly(
            "Release",
            unaryHandler(logger, async (req) => worker.releaseHold(req)),
          ),
          Resize: requirePeerRole(
            config.grpcPeerRoles,
            ["allocator"],
            "Resize",
            unaryHandler(logger, async (req, call) => {
              try {
                const reply = await worker.resize(req, call.metadata);
                resizes.inc({ outcome: "ok" });
                member?.heartbeat.beat();
                return reply;
              } catch (err) {
                resizes.inc({ outcome: grpc.status[statusOf(err).code] ?? "UNKNOWN" });
                throw err;
              }
            }),
          ),
        },
        logger,
        // Served on the direct path too, bodies pooled: a request keeps nothing of its bytes once decoded, and
        // Execute's tensors are decoded into arrays lent for the call (routed.ts executeRequestDeserialize): the
        // handler answers only once the model is done with them (Worker.execute settles after the run, or after
        // the request left a batch that had not started), and a batch is copied into arrays of its own.
        { pooled: true },
      ),
  });
  const idleTimer = setInterval(() => worker.checkIdle(), Math.max(50, Math.min(1000, config.idleTimeoutMs / 10)));

  return {
    ready: member.ready,
    shutdown: [
      // What waits for its batch to fill runs now: the frontends are about to stop sending.
      { name: "batches", run: () => worker.drainForShutdown() },
      // A job first, as a reclaim: its item in flight must be finished or given back while NATS is still up.
      { name: "job", run: () => jobRunner.stop(config.shutdownGraceMs) },
      // Harvested items go back at once: they were only ever run in idle time.
      { name: "harvest", run: () => harvester?.stop() ?? Promise.resolve() },
      ...member.shutdown,
      {
        name: "loops",
        run: () => {
          clearInterval(idleTimer);
          stopWatch();
        },
      },
    ],
  };
}

await runService("backend-worker", backendConfig, serveBackend, (config) => {
  const problem = sizeProblem(config);
  return problem === undefined ? [] : [problem];
});
