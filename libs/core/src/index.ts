export * from "./clock.js";
export * from "./distributions.js";
export * from "./glossary.js";
export * from "./min-heap.js";
export * from "./random.js";
export * from "./restart-backoff.js";
