export * from "./cluster-view.js";
export * from "./update-json.js";
