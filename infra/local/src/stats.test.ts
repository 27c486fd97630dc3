import { describe, expect, it } from "vitest";
import { ServiceStats } from "./stats.js";
import { renderSummary, type Summary, serviceSummary, totalsOf } from "./summary.js";

describe("ServiceStats", () => {
  it("counts answers, failures by code and what is still outstanding", () => {
    const s = new ServiceStats("svc", 100, 0.99);
    const a = s.onSent(0);
    const b = s.onSent(1);
    const c = s.onSent(2);
    const d = s.onSent(3);
    s.onNotSent();
    s.onAnswered(a, 50, 60);
    s.onAnswered(c, 150, 160);
    s.onFailed(b, "DEADLINE_EXCEEDED", 200);
    let t = s.totals();
    expect(t).toMatchObject({ sent: 4, answered: 2, failed: 1, outstanding: 1, notSent: 1, withinSlo: 1 });
    expect(t.failedByCode).toEqual({ DEADLINE_EXCEEDED: 1 });
    expect(t.attainment).toBeCloseTo(1 / 3);
    s.onFailed(d, "UNAVAILABLE", 300);
    t = s.totals();
    expect(t.outstanding).toBe(0);
    expect(t.failedByCode).toEqual({ DEADLINE_EXCEEDED: 1, UNAVAILABLE: 1 });
  });

  it("refuses an outcome reported twice (it would hide a lost request)", () => {
    const s = new ServiceStats("svc", 100, 0.99);
    const a = s.onSent(0);
    s.onAnswered(a, 10, 10);
    expect(() => s.onAnswered(a, 10, 10)).toThrow(/reported twice/);
    expect(() => s.onFailed(7, "X", 10)).toThrow(/never sent/);
  });

  it("feeds Swayam's SLA windows in send order, even when answers overtake", () => {
    const s = new ServiceStats("svc", 100, 0.99);
    const seqs = Array.from({ length: 1010 }, (_, i) => s.onSent(i));
    // Every request but #5 is answered in time; they complete in reverse order.
    for (const seq of [...seqs].reverse()) {
      if (seq === 5) s.onFailed(seq, "UNAVAILABLE", 2000);
      else s.onAnswered(seq, 20, 2000);
    }
    const t = s.totals();
    // Windows end after 1000, 1010: both hold the one miss, 999 >= 990 hits: compliant.
    expect(t.slaWindows).toBe(2);
    expect(t.slaCompliantWindows).toBe(2);
    expect(t.slaCompliance).toBe(1);
  });

  it("SLA compliance drops when a window has too many misses", () => {
    const s = new ServiceStats("svc", 100, 0.99);
    for (let i = 0; i < 1000; i++) {
      const seq = s.onSent(i);
      s.onAnswered(seq, i < 11 ? 500 : 20, i + 1);
    }
    expect(s.totals().slaCompliance).toBe(0);
  });

  it("live numbers cover the last whole seconds only", () => {
    const s = new ServiceStats("svc", 100, 0.99);
    for (let i = 0; i < 20; i++) s.onAnswered(s.onSent(1000 + i * 50), i < 10 ? 10 : 200, 1000 + i * 50 + 1);
    s.onSent(2500);
    const live = s.live(2_600, 1);
    expect(live.rateRps).toBe(20);
    expect(live.completed).toBe(20);
    expect(live.attainment).toBeCloseTo(0.5);
    expect(live.p50Ms).toBeCloseTo(10, 0);
    expect(live.p99Ms).toBeCloseTo(200, -1);
    expect(s.live(10_000, 1).completed).toBe(0);
    expect(Number.isNaN(s.live(10_000, 1).attainment)).toBe(true);
  });
});

describe("summary accounting", () => {
  const summaryOf = (s: ServiceStats, backendSeconds = 12.34) => serviceSummary(s.name, s.rtMaxMs, s.slMin, s.totals(), backendSeconds, 3);

  it("lost = sent - answered - failed: 0 when every request ended", () => {
    const s = new ServiceStats("a", 100, 0.99);
    s.onAnswered(s.onSent(0), 40, 40);
    s.onFailed(s.onSent(1), "UNAVAILABLE", 50);
    const row = summaryOf(s);
    expect(row).toMatchObject({ sent: 2, answered: 1, failed: 1, lost: 0, sloAttainment: 0.5, backendSeconds: 12.3, peakBackendsInUse: 3 });
    expect(row.answered + row.failed + row.lost).toBe(row.sent);
    expect(row.slaCompliance).toBeNull();
  });

  it("a request without an outcome shows as lost, in the row, the totals and the table", () => {
    const a = new ServiceStats("a", 100, 0.99);
    a.onAnswered(a.onSent(0), 40, 40);
    a.onSent(1);
    const b = new ServiceStats("b", 200, 0.95);
    b.onAnswered(b.onSent(0), 300, 300);
    const rows = [summaryOf(a, 1), summaryOf(b, 2)];
    expect(rows[0]?.lost).toBe(1);
    const totals = totalsOf(rows);
    expect(totals).toMatchObject({ sent: 3, answered: 2, failed: 0, lost: 1, backendSeconds: 3, sloAttainment: 0.5 });
    const summary: Summary = {
      startedAt: "2020-01-01T00:00:00.000Z",
      runDir: "/tmp/run",
      workload: "test",
      loadSeconds: 10,
      interrupted: false,
      backends: 2,
      frontends: 1,
      policy: "swayam",
      maxSendLagMs: 0,
      services: rows,
      totals,
    };
    const text = renderSummary(summary);
    expect(text).toContain("1 requests got neither an answer nor an error");
    expect(text).toMatch(/│ b\s+│ 1\s+│ 1\s+│ 0\s+│ 0\s+│ 300/);
    expect(JSON.parse(JSON.stringify(summary)).services[1].slaPercentile).toBe(95);
  });

  it("the table shows failures by code", () => {
    const s = new ServiceStats("a", 100, 0.99);
    s.onFailed(s.onSent(0), "DEADLINE_EXCEEDED", 50);
    s.onFailed(s.onSent(1), "DEADLINE_EXCEEDED", 50);
    s.onFailed(s.onSent(2), "UNAVAILABLE", 50);
    const rows = [summaryOf(s)];
    const text = renderSummary({
      startedAt: "",
      runDir: "",
      workload: "w",
      loadSeconds: 1,
      interrupted: true,
      backends: 1,
      frontends: 1,
      policy: "static",
      maxSendLagMs: 0,
      services: rows,
      totals: totalsOf(rows),
    });
    expect(text).toContain("3 (DEADLINE_EXCEEDED 2, UNAVAILABLE 1)");
    expect(text).toContain("(interrupted)");
    expect(rows[0]?.p50Ms).toBeNull();
  });
});
