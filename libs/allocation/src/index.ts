export * from "./pool-size.js";
export * from "./static.js";
