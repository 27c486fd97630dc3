export * from "./arrivals.js";
export * from "./parse.js";
export * from "./read.js";
export * from "./stats.js";
export * from "./synthetic.js";
export * from "./trace.js";
