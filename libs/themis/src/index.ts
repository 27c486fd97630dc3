export * from "./latency-profile.js";
export * from "./measured-profiles.js";
