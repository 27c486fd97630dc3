export * from "./actuator.js";
export * from "./backend-resizer.js";
export * from "./kubernetes.js";
export * from "./local.js";
export * from "./typed-pools.js";
