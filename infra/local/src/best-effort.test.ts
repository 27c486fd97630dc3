import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { renderJob, summarizeJob } from "./best-effort.js";

const S = control.JobState;

describe("the local cluster's best-effort job summary", () => {
  it("says when the job started and completed, and the backends it held per 5 s", () => {
    const samples = [
      { atMs: 1_000, state: S.JOB_STATE_QUEUED, done: 0, backends: 0, preemptions: 0, redone: 0 },
      { atMs: 2_000, state: S.JOB_STATE_RUNNING, done: 10, backends: 3, preemptions: 0, redone: 0 },
      { atMs: 6_000, state: S.JOB_STATE_RUNNING, done: 50, backends: 1, preemptions: 1, redone: 0 },
      { atMs: 11_000, state: S.JOB_STATE_SUCCEEDED, done: 100, backends: 0, preemptions: 1, redone: 0 },
    ];
    const j = summarizeJob("batch-1", 100, samples, 0);
    expect(j).toEqual({
      name: "batch-1",
      items: 100,
      state: "succeeded",
      itemsDone: 100,
      itemsRedone: 0,
      preemptions: 1,
      startedAtS: 2,
      completedAtS: 11,
      mostBackends: 3,
      backendsOverTime: [3, 1, 0],
      mostHarvesting: 0,
    });
    expect(renderJob(j)).toContain("succeeded, 100/100 items, 0 redone, 1 preemptions");
  });

  it("says how many serving backends harvested for it", () => {
    const j = summarizeJob(
      "batch-1",
      10,
      [
        { atMs: 1_000, state: S.JOB_STATE_RUNNING, done: 2, backends: 0, harvesting: 2, preemptions: 0, redone: 0 },
        { atMs: 2_000, state: S.JOB_STATE_SUCCEEDED, done: 10, backends: 0, harvesting: 1, preemptions: 0, redone: 0 },
      ],
      0,
    );
    expect(j.mostHarvesting).toBe(2);
    expect(j.startedAtS).toBe(1);
    expect(renderJob(j)).toContain("at most 2 serving backends harvesting");
  });

  it("reports a job that never started", () => {
    const j = summarizeJob("batch-1", 5, [], 0);
    expect(j.state).toBe("unknown");
    expect(j.startedAtS).toBeNull();
    expect(renderJob(j)).toContain("started never, not completed");
  });
});
