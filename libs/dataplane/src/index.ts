export * from "./client-auth.js";
export * from "./client-rate-limit.js";
export * from "./deadline.js";
export * from "./retry-hint.js";
export * from "./sender-lag.js";
export * from "./validate.js";
