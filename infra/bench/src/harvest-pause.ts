/**
 * Harvesting a latency-critical backend's idle time for best-effort work: can one core that serves inference
 * requests also run batch work while it has none, if the batch work is stopped with SIGSTOP whenever a request
 * computes and continued with SIGCONT once the backend has been idle for a while, and what does that cost the
 * requests? Two processes pinned to one core (`taskset -c`), as a 1-core backend: an inference process serving
 * ResNet-18 (ONNX Runtime, 1 intra-op thread) at batch 1, one request at a time from a FIFO queue, at Poisson
 * arrivals (open loop; latency = queueing + compute, from each request's scheduled arrival), and a best-effort
 * process running ResNet-18 on larger batches in a loop. Modes: the best-effort process alone (its throughput
 * on the core), inference alone, both running freely (co-run), and both with the best-effort process paused
 * during requests (paused).
 *
 *   npm run bench:harvest-pause -- --rate 9 --duration 20 --be-batch 16 --resume-after-ms 20
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { percentile } from "./closed-loop.js";
import { processCpuMs } from "./cpu-meter.js";
import type { ChildMessage, Completions, RunMessage, RunResult } from "./harvest-pause-child.js";

const program = new Command()
  .name("bench:harvest-pause")
  .option("--rate <per-second>", "inference requests a second, Poisson arrivals (9 keeps one core ~35% busy at ~38 ms each)", "9")
  .option("--duration <seconds>", "measured seconds per mode", "20")
  .option("--warmup <seconds>", "unmeasured seconds before each mode's window", "3")
  .option("--be-batch <n>", "the best-effort process's batch (ResNet-18 images per run)", "16")
  .option("--be-alone <seconds>", "measured seconds of the best-effort process alone on the core (its full throughput)", "5")
  .option("--resume-after-ms <ms>", "paused mode: SIGCONT once the request queue has been empty this long", "20")
  .option("--cpu <n>", "the core both processes are pinned to", "0")
  .option("--seed <n>", "seed of the arrivals (the same in every mode)", "1")
  .parse();
const opts = program.opts<{
  rate: string;
  duration: string;
  warmup: string;
  beBatch: string;
  beAlone: string;
  resumeAfterMs: string;
  cpu: string;
  seed: string;
}>();
const ratePerSec = Number(opts.rate);
const durationMs = Number(opts.duration) * 1000;
const warmupMs = Number(opts.warmup) * 1000;
const beBatch = Number(opts.beBatch);
const beAloneMs = Number(opts.beAlone) * 1000;
const resumeAfterMs = Number(opts.resumeAfterMs);
const cpu = Number(opts.cpu);
const seed = Number(opts.seed);
if (!(ratePerSec > 0 && durationMs > 0 && beAloneMs > 0)) program.error("--rate, --duration and --be-alone must be positive numbers");
if (!(warmupMs >= 0 && resumeAfterMs >= 0)) program.error("--warmup and --resume-after-ms must be non-negative numbers");
if (!(Number.isInteger(beBatch) && beBatch >= 1 && beBatch <= 64))
  program.error(`--be-batch must be an integer from 1 to 64, got ${opts.beBatch}`);
if (!(Number.isInteger(cpu) && cpu >= 0)) program.error(`--cpu must be a CPU number, got ${opts.cpu}`);
if (!Number.isInteger(seed)) program.error(`--seed must be an integer, got ${opts.seed}`);

const script = fileURLToPath(new URL("./harvest-pause-child.js", import.meta.url));

/** `taskset -c <cpu>` where it is installed and allowed; otherwise nothing, and the numbers say less. */
function pinning(): string[] {
  try {
    execFileSync("taskset", ["-c", String(cpu), "true"], { stdio: "ignore" });
    return ["taskset", "-c", String(cpu)];
  } catch {
    console.warn(`warning: cannot run taskset -c ${cpu}; the processes are NOT pinned to one core and compete for all of them`);
    return [];
  }
}
const prefix = pinning();

const children = new Set<ChildProcess>();
function kill(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    // A stopped process would hold a SIGTERM until continued.
    process.kill(child.pid, "SIGCONT");
    process.kill(child.pid, signal);
  } catch {}
}
process.on("exit", () => {
  for (const c of children) kill(c, "SIGKILL");
});
for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const) {
  process.on(signal, () => process.exit(code));
}

/** A guard for the child's message of one type (the children are this benchmark's own, so the type says the shape). */
const is =
  <T extends ChildMessage>(type: T["type"]) =>
  (m: unknown): m is T =>
    typeof m === "object" && m !== null && (m as { type?: unknown }).type === type;
const isResult = is<RunResult>("result");
const isCompletions = is<Completions>("completions");

/** The child's next message that `accept` takes; fails if the child exits first. */
function nextMessage<T extends ChildMessage>(child: ChildProcess, accept: (m: unknown) => m is T): Promise<T> {
  return new Promise<T>((done, failed) => {
    const onMessage = (m: unknown) => {
      if (!accept(m)) return;
      child.off("message", onMessage);
      child.off("exit", onExit);
      done(m);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      child.off("message", onMessage);
      failed(new Error(`harvest-pause child ${child.spawnargs.slice(-2).join(" ")} exited with ${code ?? signal}`));
    };
    child.on("message", onMessage);
    child.once("exit", onExit);
  });
}

async function start(args: string[]): Promise<ChildProcess> {
  const [command = process.execPath, ...rest] = [...prefix, process.execPath, script, ...args];
  const child = spawn(command, rest, { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  children.add(child);
  child.once("exit", () => children.delete(child));
  await nextMessage(child, is<{ type: "ready" }>("ready"));
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  kill(child, "SIGTERM");
  await exited;
}

async function completions(be: ChildProcess): Promise<number[]> {
  const answer = nextMessage(be, isCompletions);
  be.send({ type: "report" });
  return (await answer).at;
}

/** Batches a second between the first and the last batch that ended in the window (a batch takes ~0.5 s). */
function batchesPerSec(at: readonly number[], from: number, to: number): number {
  const inside = at.filter((t) => t >= from && t <= to);
  const first = inside[0];
  const last = inside.at(-1);
  if (first === undefined || last === undefined || inside.length < 2) return inside.length / ((to - from) / 1000);
  return (inside.length - 1) / ((last - first) / 1000);
}

interface ModeResult {
  mode: string;
  run?: RunResult;
  beRate?: number;
  beCpuMs?: number;
  windowMs: number;
}

async function beAlone(): Promise<ModeResult> {
  const be = await start(["best-effort", String(beBatch)]);
  try {
    const pid = be.pid ?? 0;
    await new Promise((r) => setTimeout(r, warmupMs));
    const from = { at: performance.timeOrigin + performance.now(), cpu: processCpuMs(pid) };
    await new Promise((r) => setTimeout(r, beAloneMs));
    const to = { at: performance.timeOrigin + performance.now(), cpu: processCpuMs(pid) };
    const at = await completions(be);
    return { mode: "be-alone", beRate: batchesPerSec(at, from.at, to.at), beCpuMs: to.cpu - from.cpu, windowMs: to.at - from.at };
  } finally {
    await stop(be);
  }
}

async function serve(mode: "alone" | "co-run" | "paused"): Promise<ModeResult> {
  const be = mode === "alone" ? undefined : await start(["best-effort", String(beBatch)]);
  const inference = await start(["inference"]);
  try {
    const message: RunMessage = {
      type: "run",
      ratePerSec,
      warmupMs,
      durationMs,
      bePid: be?.pid ?? null,
      pause: mode === "paused",
      resumeAfterMs,
      seed,
    };
    const answer = nextMessage(inference, isResult);
    inference.send(message);
    const run = await answer;
    const windowMs = run.windowEnd - run.windowStart;
    if (!be) return { mode, run, windowMs };
    const at = await completions(be);
    return { mode, run, beRate: batchesPerSec(at, run.windowStart, run.windowEnd), beCpuMs: run.cpuBeMs ?? Number.NaN, windowMs };
  } finally {
    await stop(inference);
    if (be) await stop(be);
  }
}

const f = (n: number | undefined, digits = 1) => (n === undefined || Number.isNaN(n) ? "-" : n.toFixed(digits));

try {
  const pinned = prefix.length > 0 ? `pinned to CPU ${cpu} (taskset)` : "NOT pinned";
  console.log(
    `\nResNet-18 on ONNX Runtime (1 intra-op thread), node ${process.version}, both processes ${pinned}: inference at batch 1, ` +
      `${ratePerSec}/s Poisson, one at a time; best-effort at batch ${beBatch}; ${opts.duration} s measured per mode after ${opts.warmup} s, ` +
      `be-alone ${opts.beAlone} s; paused: SIGSTOP as a request starts, SIGCONT after ${resumeAfterMs} ms of empty queue`,
  );
  const results: ModeResult[] = [];
  for (const run of [beAlone, () => serve("alone"), () => serve("co-run"), () => serve("paused")]) {
    const r = await run();
    results.push(r);
    console.error(`[harvest-pause] ${r.mode} done`);
  }
  const fullRate = results.find((r) => r.mode === "be-alone")?.beRate ?? Number.NaN;
  const sorted = (r: ModeResult) => [...(r.run?.latenciesMs ?? [])].sort((a, b) => a - b);
  const base = results.find((r) => r.mode === "alone");
  const baseP50 = base ? percentile(sorted(base), 0.5) : Number.NaN;
  const baseP99 = base ? percentile(sorted(base), 0.99) : Number.NaN;
  console.log(
    "| mode | requests | p50 ms | p99 ms | max ms | mean compute ms | +p50 ms | +p99 ms | SIGSTOPs | BE batches/s | BE share of alone | CPU s inference / BE (% of window) |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const lat = sorted(r);
    const run = r.run;
    const p50 = run ? percentile(lat, 0.5) : undefined;
    const p99 = run ? percentile(lat, 0.99) : undefined;
    const compute = run && run.computeMs.length > 0 ? run.computeMs.reduce((a, b) => a + b, 0) / run.computeMs.length : undefined;
    const share = r.beRate === undefined ? undefined : (100 * r.beRate) / fullRate;
    const pct = (ms: number) => `${f(ms / 1000, 2)} (${f((100 * ms) / r.windowMs, 0)}%)`;
    const cpuInference = run ? pct(run.cpuInferenceMs) : "-";
    const cpuBe = r.beCpuMs === undefined ? "-" : pct(r.beCpuMs);
    console.log(
      `| ${r.mode} | ${run ? lat.length : "-"} | ${f(p50)} | ${f(p99)} | ${f(lat.at(-1))} | ${f(compute)} | ` +
        `${run && r.mode !== "alone" ? f((p50 ?? Number.NaN) - baseP50) : "-"} | ${run && r.mode !== "alone" ? f((p99 ?? Number.NaN) - baseP99) : "-"} | ` +
        `${run ? run.stops : "-"} | ${f(r.beRate, 2)} | ${share === undefined ? "-" : `${f(share, 0)}%`} | ${cpuInference} / ${cpuBe} |`,
    );
  }
} finally {
  for (const c of children) kill(c, "SIGKILL");
}
