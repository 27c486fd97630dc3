export * from "./floors.js";
export * from "./grace.js";
export * from "./harvest.js";
export * from "./headroom.js";
export * from "./hung-item.js";
export * from "./loan-plan.js";
export * from "./reclaim.js";
