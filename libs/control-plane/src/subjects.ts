import { control } from "@infergrid/proto";

/** Every NATS subject and KV name of the control plane, in one place. */
export const subjects = {
  heartbeat: (role: RoleName, id: string) => `ig.hb.${role}.${id}`,
  heartbeatsOf: (role: RoleName) => `ig.hb.${role}.*`,
  allHeartbeats: "ig.hb.>",
  load: (service: string) => `ig.load.${service}`,
  allLoad: "ig.load.*",
  forecast: (service: string) => `ig.forecast.${service}`,
  allForecasts: "ig.forecast.*",
  plan: "ig.plan",
  poolEvents: "ig.pool.events",
} as const;

export const REGISTRY_BUCKET = "ig_registry";
export const serviceKey = (name: string) => `svc.${name}`;
export const assignmentKey = (backendId: string) => `backend.${backendId}`;

/** Best-effort jobs (FaPES): job records, item results, and the work-queue stream of items. */
export const JOBS_BUCKET = "ig_jobs";
export const JOB_RESULTS_BUCKET = "ig_job_results";
/**
 * A done job's results as audited, copied out of JOB_RESULTS_BUCKET (which every backend may write) when the audit
 * passes: only the allocator may write here (its key is a token of its own, outside the backends' `$KV.ig_job_results.>`).
 */
export const JOB_RESULTS_DONE_BUCKET = "ig_job_results_done";
export const JOB_ITEMS_STREAM = "IG_JOB_ITEMS";
export const jobKey = (name: string) => `job.${name}`;
export const jobResultKey = (job: string, item: number) => `${job}.${item}`;
export const jobItemsSubject = (job: string) => `ig.job.items.${job}`;
export const allJobItems = "ig.job.items.>";
export const jobConsumer = (job: string) => `job-${job}`;

export type RoleName = "broker" | "frontend" | "backend" | "predictor" | "allocator";

export const roleEnum: Record<RoleName, control.Role> = {
  broker: control.Role.ROLE_BROKER,
  frontend: control.Role.ROLE_FRONTEND,
  backend: control.Role.ROLE_BACKEND,
  predictor: control.Role.ROLE_PREDICTOR,
  allocator: control.Role.ROLE_ALLOCATOR,
};

/** A heartbeat's role as the token its subjects use; undefined for an unknown role. */
export function roleNameOf(role: control.Role | null | undefined): RoleName | undefined {
  return role == null ? undefined : ROLE_NAMES.get(role);
}

const ROLE_NAMES = new Map(Object.entries(roleEnum).map(([name, value]) => [value, name as RoleName]));

const SERVICE_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Service names end up in subjects and keys: a name that is not a valid token is refused. */
export function serviceNameProblem(name: string): string | undefined {
  return SERVICE_NAME.test(name) ? undefined : `service name ${JSON.stringify(name)} must match ${SERVICE_NAME.source}`;
}

export function instanceIdProblem(id: string): string | undefined {
  return INSTANCE_ID.test(id) ? undefined : `instance id ${JSON.stringify(id)} must match ${INSTANCE_ID.source}`;
}
