/**
 * A job's service-time profile, as a scenario writes it, turned into what the simulator draws from
 * (config.ts ServiceTimeSpec). A measured profile is one row of a latency table (../shared/profiles, by path)
 * fitted with a lognormal (loc 0) through its median and p99, or its median and mean; or taken as a constant
 * at its median.
 */
import { readFileSync } from "node:fs";
import type { ServiceTimeSpec } from "./config.js";
import { resolveInput } from "./paths.js";
import type { Profile } from "./scenario.js";

/** The standard normal's 0.99 quantile. */
const Z99 = 2.3263478740408408;

export type MeasuredProfile = Extract<Profile, { kind: "measured" }>;

/** What a table row gives: its median and, if present, its p99 and mean (ms). */
export interface MeasuredRow {
  p50: number;
  p99?: number;
  mean?: number;
}

export function serviceTimeOf(profile: Profile, lookup: (p: MeasuredProfile) => MeasuredRow): ServiceTimeSpec {
  switch (profile.kind) {
    case "lognormal":
      return { kind: "lognormal", dist: { shape: profile.shape, loc: profile.loc, scale: profile.scale } };
    case "exponential":
      return { kind: "exponential", meanMs: profile.meanMs };
    case "deterministic":
      return { kind: "deterministic", ms: profile.ms };
    case "measured":
      return fitMeasured(lookup(profile), profile);
  }
}

/** A lognormal with loc 0 through p50 and p99 (or p50 and the mean), or a constant at p50. */
export function fitMeasured(row: MeasuredRow, profile: Pick<MeasuredProfile, "fit" | "file">): ServiceTimeSpec {
  if (profile.fit === "p50") return { kind: "deterministic", ms: row.p50 };
  let shape: number;
  if (row.p99 !== undefined) {
    if (!(row.p99 > row.p50)) throw new Error(`${profile.file}: p99 ${row.p99} is not above p50 ${row.p50}; use fit: p50`);
    shape = Math.log(row.p99 / row.p50) / Z99;
  } else if (row.mean !== undefined) {
    if (!(row.mean > row.p50)) throw new Error(`${profile.file}: mean ${row.mean} is not above p50 ${row.p50}; use fit: p50`);
    shape = Math.sqrt(2 * Math.log(row.mean / row.p50));
  } else {
    throw new Error(`${profile.file}: the entry has a p50 but neither a p99 nor a mean to fit a lognormal; use fit: p50`);
  }
  return { kind: "lognormal", dist: { shape, loc: 0, scale: row.p50 } };
}

const FIELD = { p50: ["p50", "p50_ms"], p99: ["p99", "p99_ms"], mean: ["mean", "mean_ms"] } as const;

function pick(record: Record<string, unknown>, names: readonly string[]): number | undefined {
  for (const n of names) {
    const v = record[n];
    const x = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : Number.NaN;
    if (Number.isFinite(x) && x > 0) return x;
  }
  return undefined;
}

function rowOf(record: Record<string, unknown>, where: string): MeasuredRow {
  const p50 = pick(record, FIELD.p50);
  if (p50 === undefined) throw new Error(`${where} has no p50 (fields: ${Object.keys(record).join(", ")})`);
  const p99 = pick(record, FIELD.p99);
  const mean = pick(record, FIELD.mean);
  return { p50, ...(p99 === undefined ? {} : { p99 }), ...(mean === undefined ? {} : { mean }) };
}

/** Reads a measured profile's row: a dotted path into a JSON file, or the one CSV row whose columns match. */
export function readMeasuredRow(profile: MeasuredProfile, scenarioDir: string | undefined, profilesDir: string): MeasuredRow {
  const path = resolveInput(profile.file, scenarioDir, profilesDir);
  if (path === undefined)
    throw new Error(
      `profile file not found: ${profile.file} (looked ${scenarioDir === undefined ? "" : `beside the scenario and `}in ${profilesDir}; set --profiles)`,
    );
  const text = readFileSync(path, "utf8");
  if (typeof profile.entry === "string") {
    let node: unknown;
    try {
      node = JSON.parse(text);
    } catch {
      throw new Error(`${profile.file}: a dotted entry needs a JSON file; for a CSV give { column: value, ... }`);
    }
    for (const key of profile.entry.split(".")) {
      node = node !== null && typeof node === "object" ? (node as Record<string, unknown>)[key] : undefined;
      if (node === undefined) throw new Error(`${profile.file}: no entry ${profile.entry} (no "${key}")`);
    }
    if (node === null || typeof node !== "object") throw new Error(`${profile.file}: entry ${profile.entry} is not a table row`);
    return rowOf(node as Record<string, unknown>, `${profile.file} entry ${profile.entry}`);
  }
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const header = (lines[0] ?? "").split(",").map((h) => h.trim());
  const wanted = Object.entries(profile.entry);
  for (const [column] of wanted)
    if (!header.includes(column)) throw new Error(`${profile.file}: no column ${column} (columns: ${header.join(", ")})`);
  const matches = lines.slice(1).filter((line) => {
    const cells = line.split(",").map((c) => c.trim());
    return wanted.every(([column, value]) => cells[header.indexOf(column)] === String(value));
  });
  const what = wanted.map(([c, v]) => `${c}=${v}`).join(", ");
  if (matches.length !== 1) throw new Error(`${profile.file}: ${matches.length} rows match ${what}; the entry must pick exactly one`);
  const cells = (matches[0] as string).split(",").map((c) => c.trim());
  return rowOf(Object.fromEntries(header.map((h, i) => [h, cells[i]])), `${profile.file} row ${what}`);
}
