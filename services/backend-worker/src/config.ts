import { field } from "@infergrid/runtime";
import { z } from "zod";

export const backendConfig = z.object({
  instanceType: field.string("cpu-1").describe("instance type this worker reports (for the allocator)"),
  concurrency: field.int(1, 1, 64).describe("requests executed at once (Swayam: 1)"),
  idleTimeoutMs: field.ms(300_000).describe("T: a warm backend idle this long decommissions itself"),
  tSetupMs: field.ms(10_000).describe("t_setup: window for the distinct-frontends count"),
  maxRequestBytes: field.int(16 * 1024 * 1024, 1024).describe("largest accepted request, bytes"),
  holdMs: field.ms(1_000).describe("late binding: how long a slot held for a parked request waits for its Execute"),
  onnxThreads: field.int(1, 1, 64).describe("intra-op threads for ONNX models (unless the spec says)"),
});

export type BackendConfig = z.infer<typeof backendConfig>;
