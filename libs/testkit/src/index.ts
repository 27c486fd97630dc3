export * from "./certs.js";
export * from "./nats-server.js";
export * from "./registry-writer.js";
export * from "./service-process.js";
