export * from "./actuator.js";
export * from "./kubernetes.js";
export * from "./local.js";
