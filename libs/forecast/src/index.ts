export * from "./holt.js";
