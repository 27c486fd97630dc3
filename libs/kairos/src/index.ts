export * from "./batch-sizes.js";
export * from "./catalogue.js";
export * from "./configuration-search.js";
export * from "./instance-types.js";
export * from "./matching.js";
export * from "./service-configuration.js";
export * from "./upper-bound.js";
