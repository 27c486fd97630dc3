export * from "./heartbeat.js";
export * from "./heartbeat-signature.js";
export * from "./job-store.js";
export * from "./member.js";
export * from "./membership.js";
export * from "./nats-permissions.js";
export * from "./service-registry.js";
export * from "./subjects.js";
