import { violationRate } from "@infergrid/allocation";
import { control } from "@infergrid/proto";
import { describe, expect, it } from "vitest";
import { KEPT_BATCHES, MAX_FRONTENDS_PER_SERVICE, MAX_REPORTS_PER_FRONTEND, MAX_SIGNAL_SERVICES, SignalBook } from "./signals.js";

const report = (over: Partial<control.LoadReport.$Properties>) =>
  control.LoadReport.create({
    frontendId: "fe-1",
    service: "resnet",
    windowStartUnixMs: 0,
    windowEndUnixMs: 10_000,
    arrivals: 100,
    completed: 100,
    failed: 0,
    withinSlo: 99,
    serviceTimeMeanMs: 100,
    ...over,
  });

describe("SignalBook", () => {
  it("sums the frontends' reports after a time, weighting service times by completions", () => {
    const book = new SignalBook(60_000);
    expect(book.onLoadReport(report({ frontendId: "a", windowEndUnixMs: 10_000 }), 10_000)).toBeUndefined();
    book.onLoadReport(
      report({ frontendId: "a", windowEndUnixMs: 20_000, completed: 50, withinSlo: 40, failed: 2, serviceTimeMeanMs: 200 }),
      20_000,
    );
    book.onLoadReport(report({ frontendId: "b", windowEndUnixMs: 20_000, completed: 150, withinSlo: 150, serviceTimeMeanMs: 100 }), 20_000);
    const t = book.outcomes("resnet", 10_000);
    expect(t).toMatchObject({ arrivals: 200, completed: 200, failed: 2, withinSlo: 190 });
    expect(t.serviceTimeMeanMs).toBeCloseTo((50 * 200 + 150 * 100) / 200, 9);
    // 10 late + 2 failed of 202 finished.
    expect(violationRate(t)).toBeCloseTo(12 / 202, 9);
    expect(book.outcomes("resnet", 0).arrivals).toBe(300);
    expect(violationRate(book.outcomes("other", 0))).toBe(0);
  });

  it("gives the rate now: each frontend's latest fresh window, arrivals over its length, summed", () => {
    const book = new SignalBook(60_000);
    expect(book.latestRatePerS("resnet", 20_000, 3_000)).toBeUndefined();
    book.onLoadReport(report({ frontendId: "a", windowStartUnixMs: 18_000, windowEndUnixMs: 19_000, arrivals: 30 }), 19_000);
    book.onLoadReport(report({ frontendId: "a", windowStartUnixMs: 19_000, windowEndUnixMs: 20_000, arrivals: 10 }), 20_000);
    book.onLoadReport(report({ frontendId: "b", windowStartUnixMs: 18_000, windowEndUnixMs: 20_000, arrivals: 8 }), 20_000);
    // a's latest: 10 in 1 s; b's: 8 in 2 s.
    expect(book.latestRatePerS("resnet", 20_000, 3_000)).toBeCloseTo(14, 9);
    // Later, b's window is too old and a's alone counts.
    book.onLoadReport(report({ frontendId: "a", windowStartUnixMs: 20_000, windowEndUnixMs: 22_000, arrivals: 4 }), 22_000);
    expect(book.latestRatePerS("resnet", 23_500, 3_000)).toBeCloseTo(2, 9);
    expect(book.latestRatePerS("resnet", 60_000, 3_000)).toBeUndefined();
  });

  it("averages each frontend's latest windows over a span, when asked to", () => {
    const book = new SignalBook(60_000);
    for (const [start, arrivals] of [
      [17_000, 5],
      [18_000, 5],
      [19_000, 40],
    ] as const)
      book.onLoadReport(report({ frontendId: "a", windowStartUnixMs: start, windowEndUnixMs: start + 1000, arrivals }), start + 1000);
    expect(book.latestRatePerS("resnet", 20_000, 5_000)).toBeCloseTo(40, 9);
    expect(book.latestRatePerS("resnet", 20_000, 5_000, 2_000)).toBeCloseTo(22.5, 9);
    expect(book.latestRatePerS("resnet", 20_000, 5_000, 3_000)).toBeCloseTo(50 / 3, 9);
    // Only fresh windows count, however long the span asked.
    expect(book.latestRatePerS("resnet", 20_000, 1_500, 3_000)).toBeCloseTo(22.5, 9);
  });

  it("takes peers' wall-clock stamps onto the allocator's clock after this host's wall clock stepped back", () => {
    // The allocator's clock reads 4,000,000; the host's wall clock stepped back an hour, as the peers' did.
    const now = 4_000_000;
    const shift = 3_600_000;
    const book = new SignalBook(60_000);
    expect(
      book.onLoadReport(report({ windowStartUnixMs: now - shift - 1000, windowEndUnixMs: now - shift, arrivals: 20 }), now, shift),
    ).toBeUndefined();
    // Fresh on the allocator's clock (it was an hour old without the shift).
    expect(book.latestRatePerS("resnet", now, 3_000)).toBeCloseTo(20, 9);
    // A window in the future of this host's wall clock is still refused.
    expect(book.onLoadReport(report({ windowStartUnixMs: now - shift, windowEndUnixMs: now - shift + 600_000 }), now, shift)).toMatch(
      /in the future/,
    );
    const f = control.Forecast.create({
      service: "resnet",
      issuedAtUnixMs: now - shift,
      stepMs: 60_000,
      quantiles: [{ quantile: 0.5, ratePerS: [3] }],
    });
    expect(book.onForecast(f, shift)).toBeUndefined();
    expect(book.forecast("resnet", now, 5_000)?.issuedAt).toBe(now);
  });

  it("forgets reports past the keep span", () => {
    const book = new SignalBook(30_000);
    book.onLoadReport(report({ windowEndUnixMs: 10_000 }), 10_000);
    book.onLoadReport(report({ windowEndUnixMs: 50_000 }), 50_000);
    expect(book.outcomes("resnet", 0).arrivals).toBe(100);
    book.expire(100_000);
    expect(book.services()).toEqual([]);
  });

  it("refuses malformed reports and forecasts with a reason, keeping what it had", () => {
    const book = new SignalBook(60_000);
    expect(book.onLoadReport(report({ service: "Bad Name!" }), 0)).toMatch(/service name/i);
    expect(book.onLoadReport(report({ withinSlo: 101 }), 0)).toMatch(/more requests within the SLO/);
    expect(book.onLoadReport(report({ serviceTimeMeanMs: Number.NaN }), 0)).toMatch(/missing or negative/);
    expect(book.onLoadReport(report({ windowEndUnixMs: 0 }), 0)).toMatch(/no window/);
    expect(book.onLoadReport(report({ windowStartUnixMs: 9_000, windowEndUnixMs: 8_000 }), 10_000)).toMatch(
      /ends \(8000\) before it starts/,
    );
    // A window that ends in the future would never age out and would be counted at every tick.
    expect(book.onLoadReport(report({ windowEndUnixMs: 100_000 }), 10_000)).toMatch(/90000 ms in the future/);
    expect(book.outcomes("resnet", 0).arrivals).toBe(0);
    const good = control.Forecast.create({
      service: "resnet",
      issuedAtUnixMs: 1000,
      stepMs: 60_000,
      steps: 2,
      quantiles: [
        { quantile: 0.9, ratePerS: [12, 14] },
        { quantile: 0.5, ratePerS: [10, 11] },
      ],
      model: "nhits",
      observedRatePerS: 9,
    });
    expect(book.onForecast(good)).toBeUndefined();
    expect(book.onForecast(control.Forecast.create({ ...good, stepMs: 0 }))).toMatch(/step/);
    expect(book.onForecast(control.Forecast.create({ ...good, quantiles: [{ quantile: 1.5, ratePerS: [1] }] }))).toMatch(/quantiles/);
    expect(book.onForecast(control.Forecast.create({ ...good, quantiles: [{ quantile: 0.5, ratePerS: [-1] }] }))).toMatch(/quantiles/);
    const f = book.forecast("resnet", 2000, 5000);
    expect(f?.quantiles.map((q) => q.quantile)).toEqual([0.5, 0.9]);
    expect(book.forecast("resnet", 10_000, 5000)).toBeUndefined();
  });
});

describe("SignalBook: bounded under a flood", () => {
  it("keeps at most MAX_REPORTS_PER_FRONTEND of one frontend's reports, its newest, and the others' beside them", () => {
    const book = new SignalBook(600_000);
    const n = MAX_REPORTS_PER_FRONTEND + 1000;
    const last = 100_000 + n * 10;
    // 10 ms windows, all within the keep span: only the cap trims them.
    for (let i = 1; i <= n; i++)
      book.onLoadReport(
        report({ frontendId: "flood", windowStartUnixMs: 100_000 + (i - 1) * 10, windowEndUnixMs: 100_000 + i * 10, arrivals: 1 }),
        last,
      );
    book.onLoadReport(report({ frontendId: "fe-2", windowStartUnixMs: last - 1000, windowEndUnixMs: last, arrivals: 7 }), last);
    expect(book.outcomes("resnet", 0).arrivals).toBe(MAX_REPORTS_PER_FRONTEND + 7);
    // The flood's newest windows over the last second (100 of 10 ms, one arrival each) read as 100/s, fe-2's as 7/s.
    expect(book.latestRatePerS("resnet", last, 1_000, 1_000)).toBeCloseTo(100 + 7, 6);
  });

  it("refuses reports for more than MAX_SIGNAL_SERVICES services, or from more than MAX_FRONTENDS_PER_SERVICE frontends", () => {
    const book = new SignalBook(60_000);
    for (let i = 0; i < MAX_SIGNAL_SERVICES; i++) expect(book.onLoadReport(report({ service: `svc-${i}` }), 10_000)).toBeUndefined();
    expect(book.onLoadReport(report({ service: "one-more" }), 10_000)).toBe(
      `load reports are kept for at most ${MAX_SIGNAL_SERVICES} services`,
    );
    expect(book.onLoadReport(report({ service: "svc-0", frontendId: "fe-2" }), 10_000)).toBeUndefined();
    for (let i = 2; i <= MAX_FRONTENDS_PER_SERVICE; i++) book.onLoadReport(report({ service: "svc-1", frontendId: `fe-${i}` }), 10_000);
    expect(book.onLoadReport(report({ service: "svc-1", frontendId: "fe-extra" }), 10_000)).toMatch(/at most 4096 frontends per service/);
    // Expired, the services make room again.
    book.expire(100_000);
    expect(book.onLoadReport(report({ service: "one-more", windowEndUnixMs: 100_000 }), 100_000)).toBeUndefined();
  });
});

describe("SignalBook: query sizes for Kairos", () => {
  it("keeps the last 10,000 reported batch sizes per service and refuses a report with a bad one, whole", () => {
    const book = new SignalBook(60_000);
    expect(book.batches("resnet")).toEqual([]);
    book.onLoadReport(report({ windowEndUnixMs: 1000, batches: [1, 200, 900] }), 1000);
    expect([...book.batches("resnet")]).toEqual([1, 200, 900]);
    expect(book.onLoadReport(report({ windowEndUnixMs: 2000, batches: [5, 0] }), 2000)).toMatch(
      /batch size that is not a positive integer/,
    );
    expect(book.batches("resnet")).toHaveLength(3);
    for (let i = 0; i < 50; i++) book.onLoadReport(report({ windowEndUnixMs: 3000 + i, batches: Array(256).fill(7) }), 3000 + i);
    const kept = book.batches("resnet");
    expect(kept).toHaveLength(KEPT_BATCHES);
    expect(kept.every((b) => b === 7)).toBe(true); // the oldest went first
  });
});
