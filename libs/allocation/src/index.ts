export * from "./static.js";
