import type { admin, control } from "@infergrid/proto";
import { GrpcStatusError, grpc, type Logger, requirePeerRole, unaryHandler } from "@infergrid/runtime";
import type { Allocator } from "./allocator.js";

/** The AllocatorAdmin gRPC API: thin, every rule lives in the Allocator. */
export function adminHandlers(allocator: Allocator, logger: Logger, now: () => number): grpc.UntypedServiceImplementation {
  const log = logger.child({ component: "admin" });
  return {
    RegisterService: unaryHandler<admin.RegisterServiceRequest.$Properties, admin.RegisterServiceReply.$Properties>(log, (req) =>
      allocator.register(req.spec, now),
    ),
    DeregisterService: unaryHandler<admin.DeregisterServiceRequest.$Properties, admin.DeregisterServiceReply.$Properties>(
      log,
      async (req) => ({ removed: await allocator.deregister(req.name ?? "", now) }),
    ),
    GetService: unaryHandler<admin.GetServiceRequest.$Properties, control.ServiceEntry.$Properties>(log, async (req) => {
      const entry = allocator.getService(req.name ?? "");
      if (!entry) throw new GrpcStatusError(grpc.status.NOT_FOUND, `no service named ${JSON.stringify(req.name ?? "")}`);
      return entry;
    }),
    ListServices: unaryHandler<admin.ListServicesRequest.$Properties, admin.ListServicesReply.$Properties>(log, async () => ({
      services: allocator.listServices(),
    })),
    GetClusterState: unaryHandler<admin.GetClusterStateRequest.$Properties, control.ClusterState.$Properties>(log, async () =>
      allocator.clusterState(now()),
    ),
    SubmitJob: unaryHandler<admin.SubmitJobRequest.$Properties, admin.SubmitJobReply.$Properties>(log, (req) =>
      allocator.submitJob(req.spec, now),
    ),
    GetJob: unaryHandler<admin.GetJobRequest.$Properties, control.BestEffortJob.$Properties>(log, async (req) =>
      allocator.getJob(req.name ?? ""),
    ),
    ListJobs: unaryHandler<admin.ListJobsRequest.$Properties, admin.ListJobsReply.$Properties>(log, async () => ({
      jobs: allocator.listJobs(),
    })),
    CancelJob: unaryHandler<admin.CancelJobRequest.$Properties, control.BestEffortJob.$Properties>(log, (req) =>
      allocator.cancelJob(req.name ?? "", now),
    ),
  };
}

/** With --grpc-peer-roles the admin API is for admin identities only (each method unary). */
export function adminOnly(handlers: grpc.UntypedServiceImplementation, enforce: boolean): grpc.UntypedServiceImplementation {
  return Object.fromEntries(
    Object.entries(handlers).map(([method, h]) => [
      method,
      requirePeerRole(enforce, ["admin"], method, h as grpc.handleUnaryCall<unknown, unknown>),
    ]),
  );
}
