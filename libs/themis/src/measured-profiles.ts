/**
 * Reads the shared measured CPU profiles (`profiles/measured-ort-cpu-16core.json`, ONNX Runtime, and the
 * `cpu` rows of `measured-h100-16core.json`, PyTorch) into profile samples: both name each point
 * `<c>c_b<batch>` with its latency statistics in ms. Validated here, where the file enters.
 */
import { z } from "zod";
import type { ProfileSample } from "./latency-profile.js";

const stat = z.object({ p50: z.number().positive(), mean: z.number().positive().optional() }).passthrough();
const measuredFile = z.object({ models: z.record(z.string(), z.record(z.string(), z.unknown())) }).passthrough();
const POINT = /^(\d+)c_b(\d+)$/;

/** The model's points; `section` picks a nested table (the H100 file keeps its CPU rows under `cpu`). */
export function measuredSamples(json: unknown, model: string, section?: string): ProfileSample[] {
  const file = measuredFile.safeParse(json);
  if (!file.success) throw new Error(`not a measured profile file: ${z.prettifyError(file.error)}`);
  const entry = file.data.models[model];
  if (entry === undefined) throw new Error(`no model "${model}" in the profile file (it has ${Object.keys(file.data.models).join(", ")})`);
  let table: Record<string, unknown> = entry;
  if (section !== undefined) {
    const nested = z.record(z.string(), z.unknown()).safeParse(entry[section]);
    if (!nested.success) throw new Error(`model "${model}" has no "${section}" table`);
    table = nested.data;
  }
  const samples: ProfileSample[] = [];
  for (const [key, value] of Object.entries(table)) {
    const m = POINT.exec(key);
    if (!m) continue;
    const parsed = stat.safeParse(value);
    if (!parsed.success) throw new Error(`model "${model}" point ${key}: ${z.prettifyError(parsed.error)}`);
    samples.push({ cores: Number(m[1]), batch: Number(m[2]), ms: parsed.data.p50 });
  }
  if (samples.length === 0) throw new Error(`model "${model}" has no <cores>c_b<batch> points`);
  return samples.sort((a, b) => a.cores - b.cores || a.batch - b.batch);
}
