export * from "./certs.js";
export type { FloodCounts } from "./hostile-client.js";
export * from "./nats-identities.js";
export * from "./nats-server.js";
export * from "./registry-writer.js";
export * from "./service-process.js";
export * from "./tls-identities.js";
export * from "./wall-clock-step.js";
