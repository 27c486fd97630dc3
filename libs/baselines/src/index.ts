export * from "./clairvoyant.js";
export * from "./fixed.js";
export * from "./hpa.js";
export * from "./kpa.js";
export * from "./ray-serve.js";
export * from "./types.js";
export * from "./window.js";
