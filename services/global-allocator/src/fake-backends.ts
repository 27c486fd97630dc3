import { type ServiceRegistry, subjects } from "@infergrid/control-plane";
import { backend, control } from "@infergrid/proto";
import { type NatsConnection, publishMessage } from "@infergrid/runtime";

/** Test support for the allocator's integration tests: a service spec and backends that beat as a worker does. */

/** The allocator's environment in these tests: a short ttl, fast control steps and heartbeats, a 1 s grace. */
export const fastAllocatorEnv = (natsUrl: string, ttlMs: number): Record<string, string> => ({
  INFERGRID_NATS_URL: natsUrl,
  INFERGRID_BACKEND_TTL_MS: String(ttlMs),
  INFERGRID_CONTROL_PERIOD_MS: "300",
  INFERGRID_HEARTBEAT_MS: "300",
  INFERGRID_ASSIGNMENT_GRACE_MS: "1000",
});

export const emulatedSpec = (name: string, over: Partial<control.ServiceSpec.$Properties> = {}): control.ServiceSpec.$Properties => ({
  name,
  model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.36, locMs: 72.86, scaleMs: 86.69 }, coldStartMs: 500 },
  sla: { latencyThresholdMs: 500, percentile: 99, burstFactor: 2 },
  maxBackends: 3,
  ...over,
});

/**
 * Fake backends: heartbeats as a backend-worker sends them. Like the worker, a fake watches its
 * assignment and reports its service, until it "decommissions" itself (then it reports none
 * until it is assigned again).
 */
export class FakeBackends {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly watches = new Map<string, () => void>();
  private readonly assignment = new Map<string, control.BackendAssignment | undefined>();
  private readonly returnedVersion = new Map<string, number>();
  readonly state = new Map<string, backend.BackendState>();
  /** Instance type per backend (default cpu-1, the backend-worker's default). */
  readonly types = new Map<string, string>();
  /** Size per backend (Themis); none reported by default, as a worker that predates sizes. */
  readonly sizes = new Map<string, { cores: number; maxBatch: number }>();
  constructor(
    private readonly nc: NatsConnection,
    private readonly registry: ServiceRegistry,
  ) {}

  service(id: string): string {
    const a = this.assignment.get(id);
    return a?.service && Number(a.version) !== this.returnedVersion.get(id) ? a.service : "";
  }

  beat(id: string): void {
    publishMessage(this.nc, subjects.heartbeat("backend", id), control.Heartbeat, {
      role: control.Role.ROLE_BACKEND,
      id,
      address: `127.0.0.1:${10_000 + Number(id.slice(-2))}`,
      startedAtUnixMs: 1,
      sentAtUnixMs: Date.now(),
      instanceType: this.types.get(id) ?? "cpu-1",
      backend: {
        backendId: id,
        state: this.state.get(id) ?? backend.BackendState.BACKEND_STATE_COLD,
        service: this.service(id),
        reportedAtUnixMs: Date.now(),
        ...(this.sizes.get(id) ?? {}),
      },
    });
  }

  start(id: string): void {
    this.watches.set(
      id,
      this.registry.watchAssignment(id, (a) => this.assignment.set(id, a)),
    );
    this.beat(id);
    this.timers.set(
      id,
      setInterval(() => this.beat(id), 200),
    );
  }

  /** Idled T: goes cold, leaves its service and beats at once, as a real backend does. */
  decommission(id: string): void {
    this.returnedVersion.set(id, Number(this.assignment.get(id)?.version ?? 0));
    this.state.set(id, backend.BackendState.BACKEND_STATE_COLD);
    this.beat(id);
  }

  silence(id: string): void {
    clearInterval(this.timers.get(id));
    this.timers.delete(id);
    this.watches.get(id)?.();
    this.watches.delete(id);
  }

  stopAll(): void {
    for (const id of [...this.timers.keys()]) this.silence(id);
  }
}
