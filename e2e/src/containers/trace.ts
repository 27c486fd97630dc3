import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "@infergrid/testkit";

/**
 * A slice of a real trace as request rates: the per-minute counts of one function from the
 * project's shared traces, scaled so the slice's peak is `peakRate` requests/s, each trace minute
 * compressed into `stepMs`. Falls back to a fixed shape (said in the returned source) only when
 * the shared folder is absent.
 */
export interface TraceSlice {
  source: string;
  rates: number[];
  stepMs: number;
}

export function traceSlice(options: {
  column?: string;
  fromMinute?: number;
  minutes: number;
  peakRate: number;
  stepMs: number;
}): TraceSlice {
  const file = join(repoRoot, "..", "shared", "traces", "azure-functions-2019-12fn-days8-12-per-minute.csv");
  const column = options.column ?? "fn00";
  const from = options.fromMinute ?? 0;
  let counts: number[];
  let source: string;
  if (existsSync(file)) {
    const [header, ...lines] = readFileSync(file, "utf8").trim().split("\n");
    const col = header?.split(",").indexOf(column) ?? -1;
    if (col < 0) throw new Error(`${file} has no column ${column}`);
    counts = lines.slice(from, from + options.minutes).map((l) => Number(l.split(",")[col]));
    source = `${file.slice(file.indexOf("shared/"))} ${column} minutes ${from}..${from + options.minutes - 1}`;
  } else {
    counts = Array.from({ length: options.minutes }, (_, i) => 60 + 40 * Math.sin(i / 2));
    source = "synthetic (shared/traces not found)";
  }
  const peak = Math.max(...counts, 1);
  return { source, stepMs: options.stepMs, rates: counts.map((c) => Math.max(1, (c / peak) * options.peakRate)) };
}

/** Drives `setRate` through the slice; resolves at its end. */
export async function replay(slice: TraceSlice, setRate: (r: number) => void): Promise<void> {
  for (const r of slice.rates) {
    setRate(r);
    await new Promise((res) => setTimeout(res, slice.stepMs));
  }
}
