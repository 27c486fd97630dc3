import { describe, expect, it } from "vitest";
import { inTime } from "./in-time.js";
import { processingMs } from "./latency-profile.js";

const profile = { gamma: 20, eps: 10, delta: 2, eta: 3 };
const base = { profile, cores: 2, now: 1000, rows: 1, waitingRows: 0, runningEndsAt: undefined };

describe("inTime", () => {
  it("admits what ends by its deadline, and anything without one", () => {
    expect(inTime({ ...base, deadline: 1000 + processingMs(profile, 1, 2) })).toEqual({ kind: "in-time" });
    expect(inTime({ ...base, rows: 10_000, deadline: Number.POSITIVE_INFINITY })).toEqual({ kind: "in-time" });
  });

  it("calls too long what its rows alone make late, whatever waits", () => {
    expect(inTime({ ...base, rows: 100, deadline: 1500 })).toEqual({ kind: "too-long", aloneMs: processingMs(profile, 100, 2) });
  });

  it("calls late what would end after its deadline behind the running batch and the rows waiting", () => {
    const ends = 1000 + 400;
    expect(inTime({ ...base, runningEndsAt: ends, deadline: 1400 })).toEqual({
      kind: "after-deadline",
      finishesAt: ends + processingMs(profile, 1, 2),
    });
    expect(inTime({ ...base, waitingRows: 5, deadline: 1050 })).toEqual({
      kind: "after-deadline",
      finishesAt: 1000 + processingMs(profile, 6, 2),
    });
    // A batch running past its expected end is taken to end now: the estimate never makes a request later than that.
    expect(inTime({ ...base, runningEndsAt: 900, deadline: 1000 + processingMs(profile, 1, 2) })).toEqual({ kind: "in-time" });
  });
});
