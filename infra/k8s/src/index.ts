export * from "./render.js";
