export * from "./heartbeat.js";
export * from "./membership.js";
export * from "./registry.js";
export * from "./subjects.js";
