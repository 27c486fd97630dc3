export * from "./nats-server.js";
export * from "./service-process.js";
