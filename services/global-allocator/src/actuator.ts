import { type ServiceRegistry, subjects } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { type NatsConnection, publishMessage } from "@infergrid/runtime";

/** Everything the allocator changes in the world: the registry and the control-plane subjects. */
export interface Actuator {
  /** Compare-and-set on the KV revision (0 = must not exist yet); returns the new revision. */
  putService(entry: control.ServiceEntry.$Properties, revision: number): Promise<number>;
  getService(name: string): Promise<{ entry: control.ServiceEntry; revision: number } | undefined>;
  deleteService(name: string): Promise<void>;
  putAssignment(assignment: control.BackendAssignment.$Properties): Promise<void>;
  deleteAssignment(backendId: string): Promise<void>;
  poolEvent(event: control.PoolEvent.$Properties): void;
  plan(plan: control.AllocationPlan.$Properties): void;
}

export class RegistryActuator implements Actuator {
  constructor(
    private readonly registry: ServiceRegistry,
    private readonly nc: NatsConnection,
  ) {}

  putService(entry: control.ServiceEntry.$Properties, revision: number): Promise<number> {
    return this.registry.putService(entry, revision);
  }

  getService(name: string): Promise<{ entry: control.ServiceEntry; revision: number } | undefined> {
    return this.registry.getService(name);
  }

  deleteService(name: string): Promise<void> {
    return this.registry.deleteService(name);
  }

  async putAssignment(assignment: control.BackendAssignment.$Properties): Promise<void> {
    await this.registry.putAssignment(assignment);
  }

  deleteAssignment(backendId: string): Promise<void> {
    return this.registry.deleteAssignment(backendId);
  }

  poolEvent(event: control.PoolEvent.$Properties): void {
    if (!this.nc.isClosed()) publishMessage(this.nc, subjects.poolEvents, control.PoolEvent, event);
  }

  plan(plan: control.AllocationPlan.$Properties): void {
    if (!this.nc.isClosed()) publishMessage(this.nc, subjects.plan, control.AllocationPlan, plan);
  }
}

/** The registry as a restarted allocator finds it: services with their KV revisions, and assignments. */
export async function readRegistry(
  registry: ServiceRegistry,
): Promise<{ services: { entry: control.ServiceEntry; revision: number }[]; assignments: control.BackendAssignment[] }> {
  const serviceNames: string[] = [];
  const backendIds: string[] = [];
  for await (const key of await registry.kv.keys()) {
    if (key.startsWith("svc.")) serviceNames.push(key.slice("svc.".length));
    else if (key.startsWith("backend.")) backendIds.push(key.slice("backend.".length));
  }
  const services = (await Promise.all(serviceNames.sort().map((n) => registry.getService(n)))).flatMap((s) => (s ? [s] : []));
  const assignments = (await Promise.all(backendIds.sort().map((id) => registry.getAssignment(id)))).flatMap((a) => (a ? [a] : []));
  return { services, assignments };
}
