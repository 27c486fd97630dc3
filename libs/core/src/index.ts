export * from "./clock.js";
export * from "./distributions.js";
export * from "./random.js";
