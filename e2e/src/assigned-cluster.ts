import { createClient, type grpc } from "@infergrid/runtime";
import { type NatsServerHandle, RegistryWriter, type ServiceProcess, startAll, startNatsServer, startService } from "@infergrid/testkit";
import { ControlWatch } from "./control-watch.js";
import type { LoadDriver } from "./load-driver.js";

/**
 * Real NATS, backends named b0..b<n-1>, one frontend and a broker, without an allocator: the test writes the
 * service's list itself (`writer.assign`), so what it starts is exactly what serves. `watch` sees the control
 * plane's messages; `client` calls the broker. stop() tears everything down, the load driver first, and is safe
 * to call on a cluster that only partly started.
 */
export interface AssignedCluster {
  nats: NatsServerHandle;
  writer: RegistryWriter;
  watch: ControlWatch;
  backends: ServiceProcess[];
  frontend: ServiceProcess;
  broker: ServiceProcess;
  client: grpc.Client;
  stop(driver?: LoadDriver): Promise<void>;
}

export interface AssignedClusterShape {
  backends: number;
  /** The frontend's INFERGRID_ID. */
  frontendId: string;
  frontendEnv?: Record<string, string>;
  brokerEnv?: Record<string, string>;
  /** Extra node options of a process by name (b<i>, "frontend", "broker"), e.g. a wall clock to step. */
  nodeArgs?: (name: string) => string[] | undefined;
}

export async function startAssignedCluster(shape: AssignedClusterShape): Promise<AssignedCluster> {
  const nats = await startNatsServer();
  const env = { INFERGRID_NATS_URL: nats.url, INFERGRID_HEARTBEAT_MS: "250", INFERGRID_SHUTDOWN_GRACE_MS: "1000" };
  const args = (name: string) => {
    const extra = shape.nodeArgs?.(name);
    return extra === undefined ? {} : { nodeArgs: extra };
  };
  let processes: ServiceProcess[] = [];
  try {
    processes = await startAll([
      ...Array.from({ length: shape.backends }, (_, i) =>
        startService("backend-worker", {
          name: `b${i}`,
          ...args(`b${i}`),
          env: { ...env, INFERGRID_ID: `b${i}`, INFERGRID_IDLE_TIMEOUT_MS: "600000" },
        }),
      ),
      startService("frontend", { ...args("frontend"), env: { ...env, INFERGRID_ID: shape.frontendId, ...shape.frontendEnv } }),
      startService("broker", { ...args("broker"), env: { ...env, ...shape.brokerEnv } }),
    ]);
  } catch (err) {
    await nats.stop();
    throw err;
  }
  const writer = await RegistryWriter.open(nats.url);
  const watch = await ControlWatch.open(nats.url);
  const broker = processes[shape.backends + 1] as ServiceProcess;
  const client = createClient(broker.ready.grpcAddress ?? "");
  return {
    nats,
    writer,
    watch,
    backends: processes.slice(0, shape.backends),
    frontend: processes[shape.backends] as ServiceProcess,
    broker,
    client,
    stop: async (driver) => {
      await driver?.stop();
      client.close();
      await watch.close();
      await writer.close();
      await Promise.all(processes.map((p) => p.stop(3000)));
      await nats.stop();
    },
  };
}
