import { fileURLToPath } from "node:url";
import { KubernetesActuator, LocalProcessActuator, type PoolActuator } from "@infergrid/pool-actuator";
import type { Logger } from "@infergrid/runtime";
import type { AllocatorConfig } from "./config.js";

/** The actuator the configuration names, or undefined for a pool nobody resizes. */
export function createPoolActuator(config: AllocatorConfig, instanceId: string, logger: Logger): PoolActuator | undefined {
  switch (config.poolActuator) {
    case "none":
      return undefined;
    case "kubernetes":
      return new KubernetesActuator({ namespace: config.poolNamespace, workload: config.poolWorkload });
    case "local": {
      const log = logger.child({ component: "local-pool" });
      return new LocalProcessActuator({
        entry: config.poolBackendEntry ?? fileURLToPath(new URL("../../backend-worker/dist/main.js", import.meta.url)),
        // Children inherit this process's environment (NATS URL, credentials, TLS files, heartbeat);
        // ports must be their own.
        env: { INFERGRID_GRPC_PORT: "0", INFERGRID_METRICS_PORT: "0", INFERGRID_LOG_LEVEL: "warn" },
        // Unique per allocator instance: a restarted one never reuses the id of a backend it left behind.
        idPrefix: `${instanceId}-be`,
        onLine: (id, line) => log.debug({ backend: id }, line),
      });
    }
  }
}
