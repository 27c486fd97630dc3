/**
 * @infergrid/faro: Faro's slow loop (Faro, Sec. 3-4) as pure functions: SLO utilities, the M/D/c
 * latency model, per-job utility tables over a forecast, cluster objectives, an integer allocation
 * solver with proven bounds, and Faro's published solver (solveFaroPublished) as a baseline; the
 * controller that runs it, Faro as published, is libs/baselines faroPublishedPolicy.
 */
export * from "./curves.js";
export * from "./hybrid-loop.js";
export * from "./latency.js";
export * from "./mckp.js";
export * from "./objectives.js";
export * from "./published-solver.js";
export * from "./solver.js";
export * from "./utility.js";
