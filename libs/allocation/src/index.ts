export * from "./pool-size.js";
export * from "./share-controller.js";
export * from "./static.js";
