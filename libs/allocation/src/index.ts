export * from "./instance-types.js";
export * from "./pool-size.js";
export * from "./share-controller.js";
export * from "./share-planning.js";
export * from "./slow-loop-defaults.js";
export * from "./static.js";
export * from "./typed-capacity.js";
