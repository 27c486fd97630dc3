export * from "./nats-server.js";
export * from "./service-process.js";
export * from "./registry-writer.js";
