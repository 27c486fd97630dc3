import { ServiceRegistry } from "@infergrid/control-plane";
import type { control } from "@infergrid/proto";
import { connectNats, createLogger, type NatsConnection } from "@infergrid/runtime";
import type { ServiceProcess } from "./service-process.js";

/**
 * Writes the registry the way the allocator does (assignment first, then the ordered list), so
 * the fast loop (frontends and backends) can be tested on its own.
 */
export class RegistryWriter {
  private version = 0;

  private constructor(
    readonly nc: NatsConnection,
    readonly registry: ServiceRegistry,
  ) {}

  static async open(natsUrl: string): Promise<RegistryWriter> {
    const logger = createLogger("test", "registry-writer", "warn");
    const nc = await connectNats({ servers: natsUrl, name: "registry-writer" }, logger);
    return new RegistryWriter(nc, await ServiceRegistry.open(nc, logger));
  }

  /** `instanceTypeOf` names each backend's instance type in the list (all "cpu-1" by default). */
  async assign(
    spec: control.ServiceSpec.$Properties,
    backends: ServiceProcess[],
    minWarm = 1,
    instanceTypeOf: (b: ServiceProcess) => string = () => "cpu-1",
  ): Promise<void> {
    this.version += 1;
    for (const b of backends) {
      await this.registry.putAssignment({
        backendId: b.ready.id,
        service: spec.name,
        model: spec.model,
        version: this.version,
        updatedAtUnixMs: Date.now(),
      });
    }
    await this.registry.putService({
      spec,
      backends: backends.map((b) => ({ backendId: b.ready.id, address: b.ready.grpcAddress, instanceType: instanceTypeOf(b) })),
      version: this.version,
      updatedAtUnixMs: Date.now(),
      minWarm,
    });
  }

  async close(): Promise<void> {
    await this.nc.close();
  }
}
