export * from "./baselines.js";
export * from "./evaluation.js";
export * from "./factory.js";
export * from "./forecaster.js";
export * from "./holt.js";
export * from "./nhits.js";
export * from "./nhits-forecaster.js";
export * from "./series.js";
