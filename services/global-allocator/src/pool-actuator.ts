import { fileURLToPath } from "node:url";
import { KubernetesActuator, LocalProcessActuator, type PoolActuator, TypedPools } from "@infergrid/pool-actuator";
import { type Logger, resolveControlToken } from "@infergrid/runtime";
import type { AllocatorConfig } from "./config.js";

/**
 * The actuator the configuration names, or undefined for a pool nobody resizes. With --pool-types, one
 * pool per instance type behind TypedPools, each capped at its type's maxCount from the price list.
 * Assumes configProblems(config) found nothing.
 */
export function createPoolActuator(config: AllocatorConfig, instanceId: string, logger: Logger): PoolActuator | undefined {
  if (config.poolActuator === "none") return undefined;
  if (config.poolTypes.length === 0) return single(config, instanceId, logger, config.poolWorkload);
  return new TypedPools(
    config.poolTypes.map((p) => {
      const maxCount = config.instanceTypes?.find((t) => t.name === p.instanceType)?.maxCount;
      return {
        instanceType: p.instanceType,
        actuator: single(config, instanceId, logger, p.workload ?? config.poolWorkload, p.instanceType),
        ...(maxCount !== undefined ? { maxCount } : {}),
      };
    }),
  );
}

function single(config: AllocatorConfig, instanceId: string, logger: Logger, workload: string, instanceType?: string): PoolActuator {
  if (config.poolActuator === "kubernetes") {
    // Without the token a resize patches no pod: the backend could not be told its size (the actuator refuses it).
    const controlToken = resolveControlToken(config);
    return new KubernetesActuator({ namespace: config.poolNamespace, workload, ...(controlToken === undefined ? {} : { controlToken }) });
  }
  const log = logger.child({ component: "local-pool", ...(instanceType ? { instanceType } : {}) });
  // Instance ids take letters, digits, - and _ only: g4dn.xlarge's backends are <id>-be-g4dn_xlarge-<n>.
  const typeTag = instanceType ? `-${instanceType.replace(/[^A-Za-z0-9_-]/g, "_")}` : "";
  return new LocalProcessActuator({
    entry: config.poolBackendEntry ?? fileURLToPath(new URL("../../backend-worker/dist/main.js", import.meta.url)),
    // Children inherit this process's environment (NATS URL, credentials, TLS files, heartbeat), but a
    // backend's own NATS identity and certificate when given (the allocator's may write the registry and
    // resize backends; a backend's may not); ports must be their own.
    env: {
      INFERGRID_GRPC_PORT: "0",
      INFERGRID_METRICS_PORT: "0",
      INFERGRID_LOG_LEVEL: "warn",
      ...(config.poolBackendNatsUser !== undefined
        ? { INFERGRID_NATS_USER: config.poolBackendNatsUser, INFERGRID_NATS_PASS_FILE: config.poolBackendNatsPassFile ?? "" }
        : {}),
      ...(config.poolBackendGrpcTlsCertFile !== undefined
        ? {
            INFERGRID_GRPC_TLS_CERT_FILE: config.poolBackendGrpcTlsCertFile,
            INFERGRID_GRPC_TLS_KEY_FILE: config.poolBackendGrpcTlsKeyFile ?? "",
            INFERGRID_NATS_TLS_CERT_FILE: config.poolBackendGrpcTlsCertFile,
            INFERGRID_NATS_TLS_KEY_FILE: config.poolBackendGrpcTlsKeyFile ?? "",
          }
        : {}),
    },
    ...(config.poolBackendNatsUser !== undefined
      ? { unsetEnv: ["INFERGRID_NATS_PASS", "INFERGRID_NATS_TOKEN", "INFERGRID_NATS_TOKEN_FILE"] }
      : {}),
    ...(instanceType ? { instanceType } : {}),
    // Unique per allocator instance: a restarted one never reuses the id of a backend it left behind.
    idPrefix: `${instanceId}-be${typeTag}`,
    onLine: (id, line) => log.debug({ backend: id }, line),
  });
}
