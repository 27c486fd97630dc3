/**
 * A child process of `runExperimentInProcesses`: runs the (policy, seed) runs it is sent, one at a time, and
 * sends each result back. A run is a pure function of the prepared experiment, the policy and the seed, so a
 * run made here is the very run the sequential runner makes; only the CPU time is this process's own.
 */
import { EXPERIMENTS, isExperimentName } from "./experiments.js";
import type { WorkerReply, WorkerTask } from "./parallel.js";
import { isPolicyName } from "./policies.js";
import { type PreparedExperiment, prepareExperiment, runOne } from "./run-experiment.js";

// biome-ignore lint/style/noRestrictedGlobals: a worker process's entry point talks to its parent over IPC.
const proc = process;

let prepared: { key: string; p: PreparedExperiment } | undefined;

async function handle(task: WorkerTask): Promise<void> {
  if (!isExperimentName(task.experiment)) throw new Error(`unknown experiment '${task.experiment}'`);
  if (!isPolicyName(task.policy)) throw new Error(`unknown policy '${task.policy}'`);
  const key = `${task.experiment}\u0000${task.tracesDir}`;
  if (prepared?.key !== key) prepared = { key, p: await prepareExperiment(EXPERIMENTS[task.experiment], task.tracesDir) };
  let last = 0;
  const run = runOne(prepared.p, task.policy, task.seed, (fraction) => {
    // Progress a few times a second at most: IPC is not free.
    const now = performance.now();
    if (now - last < 250) return;
    last = now;
    send({ kind: "progress", index: task.index, fraction });
  });
  send({ kind: "result", index: task.index, run });
}

function send(reply: WorkerReply): void {
  proc.send?.(reply);
}

proc.on("message", (task: WorkerTask) => {
  handle(task).catch((err: unknown) => {
    send({ kind: "error", index: task.index, message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  });
});
proc.on("disconnect", () => proc.exit(0));
