import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { LoadWindows } from "./windows.js";

const report = (service: string, frontendId: string, endMs: number, arrivals: number) =>
  control.LoadReport.create({ service, frontendId, windowStartUnixMs: endMs - 1000, windowEndUnixMs: endMs, arrivals });

describe("LoadWindows", () => {
  it("sums frontends into windows by window end and reads only closed windows", () => {
    const w = new LoadWindows(10_000, 100, 1_000);
    // Two frontends, out of phase, in window 0 (0, 10000] and window 1 (10000, 20000].
    expect(w.add(report("svc", "f1", 4_000, 30), 4_000)).toBe("accepted");
    expect(w.add(report("svc", "f2", 10_000, 20), 10_000)).toBe("accepted");
    expect(w.add(report("svc", "f1", 10_400, 50), 10_400)).toBe("accepted");
    // Window 0, where the first report fell, is partial: never in the series.
    expect(w.rates("svc", 11_000)).toEqual([]);
    expect(w.add(report("svc", "f2", 20_000, 50), 20_500)).toBe("accepted"); // late but before the window closes
    expect(w.rates("svc", 20_999)).toEqual([]);
    expect(w.rates("svc", 21_000)).toEqual([10]); // (50 + 50) / 10 s
    // Window 2 had no report at all (NATS away): it carries window 1's rate. Window 3 had reports of no arrivals.
    expect(w.rates("svc", 31_000)).toEqual([10, 10]);
    w.add(report("svc", "f1", 35_000, 0), 35_000);
    w.add(report("svc", "f2", 38_000, 0), 38_000);
    expect(w.rates("svc", 41_000)).toEqual([10, 10, 0]);
  });

  it("refuses bad reports and ones older than the history, bounds the history and forgets quiet services", () => {
    const w = new LoadWindows(1_000, 3, 0);
    expect(w.add(report("Bad Name", "f", 500, 1), 500)).toBe("invalid");
    expect(w.add(report("svc", "f", 0, 1), 500)).toBe("invalid");
    // Dated a minute ahead: refused, so it neither fixes the service's first window in the future nor hides
    // the rates of the reports that follow.
    expect(w.add(report("svc", "f", 60_500, 1), 500)).toBe("invalid");
    for (let t = 1; t <= 10; t++) w.add(report("svc", "f", t * 1000, t), t * 1000);
    expect(w.rates("svc", 10_000)).toEqual([8, 9, 10]);
    expect(w.add(report("svc", "f", 5_000, 1), 10_000)).toBe("too_old");
    expect(w.forget(20_000, 5_000)).toEqual(["svc"]);
    expect(w.serviceNames()).toEqual([]);
  });

  it("keeps windows for a bounded number of services", () => {
    const w = new LoadWindows(1_000, 3, 0, 2);
    expect(w.add(report("a", "f", 1000, 1), 1000)).toBe("accepted");
    expect(w.add(report("b", "f", 1000, 1), 1000)).toBe("accepted");
    expect(w.add(report("c", "f", 1000, 1), 1000)).toBe("too_many_services");
    expect(w.add(report("a", "g", 1000, 1), 1000)).toBe("accepted");
    expect(w.serviceNames()).toEqual(["a", "b"]);
    w.forget(10_000, 5_000);
    expect(w.add(report("c", "f", 10_000, 1), 10_000)).toBe("accepted");
  });
});
