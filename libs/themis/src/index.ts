export * from "./horizontal-scaling.js";
export * from "./latency-profile.js";
export * from "./measured-profiles.js";
export * from "./pipeline-dp.js";
export * from "./profile-file.js";
export * from "./stage-config.js";
export * from "./transition.js";
export * from "./vertical-scaling.js";
