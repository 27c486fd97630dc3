/**
 * A named experiment's runs spread over child processes (`npm run sim -- <experiment> --workers N`). The runs
 * are independent and each is a pure function of (experiment, policy, seed), so the result is the sequential
 * runner's, in the same order; what changes is the wall time. Processes rather than worker threads, so each
 * run's CPU time (process.cpuUsage in simulate) stays its own.
 */
import { type ChildProcess, fork } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { EXPERIMENTS, type ExperimentName } from "./experiments.js";
import type { PolicyName } from "./policies.js";
import { type ExperimentHooks, type ExperimentResult, prepareExperiment } from "./run-experiment.js";
import type { RunResult } from "./simulate.js";

export interface WorkerTask {
  index: number;
  experiment: string;
  tracesDir: string;
  policy: string;
  seed: number;
}

export type WorkerReply =
  | { kind: "progress"; index: number; fraction: number }
  | { kind: "result"; index: number; run: RunResult }
  | { kind: "error"; index: number; message: string };

export interface ParallelHooks extends Pick<ExperimentHooks, "onRunEnd"> {
  /** Share of the whole experiment done, in [0, 1]. */
  onTotalProgress?(fraction: number): void;
}

/** The worker's module: beside this one once built; from the sources (under vitest), the built one. */
function workerPath(): string {
  const here = fileURLToPath(new URL("./run-worker.js", import.meta.url));
  if (existsSync(here)) return here;
  const built = fileURLToPath(new URL("../dist/run-worker.js", import.meta.url));
  if (existsSync(built)) return built;
  throw new Error(`the simulator's worker module is not built (${built}); run npx tsc -b libs/sim`);
}

export async function runExperimentInProcesses(
  name: ExperimentName,
  options: { tracesDir: string; workers: number; policies?: PolicyName[]; seeds?: number[]; hooks?: ParallelHooks },
): Promise<ExperimentResult> {
  if (!Number.isInteger(options.workers) || options.workers < 1)
    throw new RangeError(`workers must be an integer >= 1, got ${options.workers}`);
  const started = performance.now();
  const experiment = EXPERIMENTS[name];
  const p = await prepareExperiment(experiment, options.tracesDir);
  const policies = options.policies ?? experiment.policies;
  const seeds = options.seeds ?? experiment.seeds;
  const tasks: WorkerTask[] = policies.flatMap((policy, i) =>
    seeds.map((seed, k) => ({ index: i * seeds.length + k, experiment: name, tracesDir: options.tracesDir, policy, seed })),
  );
  const runs: (RunResult | undefined)[] = new Array(tasks.length);
  const inFlight = new Map<number, number>();
  let done = 0;
  const path = workerPath();
  const children: ChildProcess[] = [];

  await new Promise<void>((resolveAll, rejectAll) => {
    let next = 0;
    let failed = false;
    const released = new Set<ChildProcess>();
    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      for (const c of children) c.kill();
      rejectAll(err);
    };
    const report = () => {
      let partial = 0;
      for (const f of inFlight.values()) partial += f;
      options.hooks?.onTotalProgress?.(tasks.length === 0 ? 1 : (done + partial) / tasks.length);
    };
    const feed = (child: ChildProcess) => {
      const task = tasks[next++];
      if (task === undefined) {
        released.add(child);
        child.disconnect();
        return;
      }
      inFlight.set(task.index, 0);
      child.send(task);
    };
    if (tasks.length === 0) {
      resolveAll();
      return;
    }
    const count = Math.min(options.workers, tasks.length);
    let exited = 0;
    for (let w = 0; w < count; w++) {
      const child = fork(path, [], { serialization: "advanced", stdio: ["ignore", "inherit", "inherit", "ipc"] });
      children.push(child);
      child.on("message", (m: WorkerReply) => {
        if (m.kind === "progress") {
          inFlight.set(m.index, m.fraction);
          report();
          return;
        }
        if (m.kind === "error") {
          fail(new Error(`run ${tasks[m.index]?.policy} seed ${tasks[m.index]?.seed} failed: ${m.message}`));
          return;
        }
        runs[m.index] = m.run;
        inFlight.delete(m.index);
        done++;
        options.hooks?.onRunEnd?.(m.run);
        report();
        feed(child);
      });
      child.on("error", (err) => fail(err));
      child.on("exit", (code, signal) => {
        exited++;
        if (!released.has(child))
          fail(new Error(`a simulator worker exited (${signal ?? `code ${code}`}) with ${tasks.length - done} runs not done`));
        else if (exited === count) resolveAll();
      });
      feed(child);
    }
  });

  return {
    experiment,
    capacity: p.capacity,
    listLengths: p.listLengths,
    peakSized: p.peakSized,
    jobs: [...p.trace.jobs],
    runs: runs.map((r, i) => {
      if (r === undefined) throw new Error(`run ${i} has no result`);
      return r;
    }),
    wallMs: performance.now() - started,
  };
}
