import { AllocatorAdminDefinition, control } from "@infergrid/proto";
import { createClient, type grpc, unaryCall } from "@infergrid/runtime";

/** The local cluster's best-effort job: batch inference with an emulated model, 40-60 ms an item. */
export function bestEffortSpec(items: number, maxBackends: number): control.BestEffortJobSpec.$Properties {
  return {
    name: "batch-1",
    model: { kind: control.ModelKind.MODEL_KIND_EMULATED, profile: { shape: 0.1, locMs: 10, scaleMs: 40 }, coldStartMs: 500 },
    items,
    itemBatch: 1,
    minBackends: 1,
    maxBackends,
    seed: 1,
  };
}

/** One look at the job. */
export interface JobSample {
  atMs: number;
  state: control.JobState;
  done: number;
  backends: number;
  /** Serving backends harvesting for it (--harvest). */
  harvesting?: number;
  preemptions: number;
  redone: number;
}

export interface JobSummary {
  name: string;
  items: number;
  state: string;
  itemsDone: number;
  itemsRedone: number;
  preemptions: number;
  /** Seconds after the load began (null: not yet). */
  startedAtS: number | null;
  completedAtS: number | null;
  mostBackends: number;
  /** Backends held, per 5 s of the run. */
  backendsOverTime: number[];
  /** The most serving backends harvesting for it at once. */
  mostHarvesting: number;
}

/** Submits the job and follows it through the allocator's admin API once a second. */
export class BestEffortWatch {
  private readonly samples: JobSample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly admin: grpc.Client;
  private items = 0;

  constructor(
    allocatorAddress: string,
    private readonly now: () => number = Date.now,
    /** An admin certificate when the allocator admits its admin API by role; undefined: plaintext. */
    credentials?: grpc.ChannelCredentials,
  ) {
    this.admin = createClient(allocatorAddress, credentials);
  }

  async submit(spec: control.BestEffortJobSpec.$Properties): Promise<void> {
    await unaryCall(this.admin, AllocatorAdminDefinition.SubmitJob, { spec }, { deadline: this.now() + 5_000 });
    this.items = spec.items ?? 0;
    const name = spec.name ?? "";
    this.timer = setInterval(() => {
      unaryCall(this.admin, AllocatorAdminDefinition.GetJob, { name }, { deadline: this.now() + 900 }).then(
        (j) =>
          this.samples.push({
            atMs: this.now(),
            state: j.state ?? control.JobState.JOB_STATE_UNSPECIFIED,
            done: j.itemsDone ?? 0,
            backends: j.backends?.length ?? 0,
            harvesting: j.harvesting?.length ?? 0,
            preemptions: j.preemptions ?? 0,
            redone: j.itemsRedone ?? 0,
          }),
        () => {},
      );
    }, 1_000);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.admin.close();
  }

  summary(name: string, t0: number): JobSummary {
    return summarizeJob(name, this.items, this.samples, t0);
  }
}

export function summarizeJob(name: string, items: number, samples: readonly JobSample[], t0: number): JobSummary {
  const last = samples[samples.length - 1];
  const started = samples.find((s) => s.backends > 0 || s.done > 0);
  const completed = samples.find((s) => s.state === control.JobState.JOB_STATE_SUCCEEDED);
  const perFive: number[] = [];
  for (const s of samples) {
    const i = Math.max(0, Math.floor((s.atMs - t0) / 5_000));
    perFive[i] = Math.max(perFive[i] ?? 0, s.backends);
  }
  const seconds = (at: number) => Number(((at - t0) / 1000).toFixed(1));
  return {
    name,
    items,
    state: last ? (control.JobState[last.state] ?? String(last.state)).replace("JOB_STATE_", "").toLowerCase() : "unknown",
    itemsDone: last?.done ?? 0,
    itemsRedone: last?.redone ?? 0,
    preemptions: last?.preemptions ?? 0,
    startedAtS: started ? seconds(started.atMs) : null,
    completedAtS: completed ? seconds(completed.atMs) : null,
    mostBackends: samples.reduce((m, s) => Math.max(m, s.backends), 0),
    backendsOverTime: Array.from(perFive, (x) => x ?? 0),
    mostHarvesting: samples.reduce((m, s) => Math.max(m, s.harvesting ?? 0), 0),
  };
}

export function renderJob(j: JobSummary): string {
  return [
    `best-effort job ${j.name}: ${j.state}, ${j.itemsDone}/${j.items} items, ${j.itemsRedone} redone, ${j.preemptions} preemptions`,
    `  started ${j.startedAtS === null ? "never" : `at ${j.startedAtS} s`}, ${j.completedAtS === null ? "not completed" : `completed at ${j.completedAtS} s`}, at most ${j.mostBackends} backends`,
    `  backends held per 5 s: ${j.backendsOverTime.join(" ")}`,
    ...(j.mostHarvesting > 0 ? [`  at most ${j.mostHarvesting} serving backends harvesting their idle time for it`] : []),
  ].join("\n");
}
