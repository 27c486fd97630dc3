/**
 * The summary speaks the glossary's terms (@infergrid/core, shared with the simulator's report): its headers are
 * the terms' local labels, its JSON keys the terms' local keys, and its last line the legend of the terms shown.
 */
import { GLOSSARY, GLOSSARY_SOURCE, glossaryTerm } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { ServiceStats } from "./stats.js";
import { renderSummary, type Summary, serviceSummary, summaryColumns, termsLegend, totalsOf } from "./summary.js";

function summary(notSent = 0, coreSeconds?: number): Summary {
  const s = new ServiceStats("a", 100, 0.99);
  s.onAnswered(s.onSent(0), 40, 40);
  s.onFailed(s.onSent(1), "UNAVAILABLE", 50);
  for (let i = 0; i < notSent; i++) s.onNotSent();
  const row = { ...serviceSummary("a", 100, 0.99, s.totals(), 12.3, 2), ...(coreSeconds === undefined ? {} : { coreSeconds }) };
  return {
    startedAt: "2020-01-01T00:00:00.000Z",
    runDir: "/tmp/run",
    workload: "test",
    loadSeconds: 10,
    interrupted: false,
    backends: 2,
    frontends: 1,
    policy: "swayam",
    maxSendLagMs: 0,
    services: [row],
    totals: totalsOf([row]),
  };
}

const localLabels = (id: string): readonly string[] => {
  const t = GLOSSARY.find((g) => g.id === id);
  return t !== undefined && "local" in t ? t.local.labels : [];
};

describe("the summary's terms", () => {
  it("every header but the service's name is one of its glossary term's local labels", () => {
    for (const sized of [false, true]) {
      const columns = summaryColumns(sized);
      expect(columns.filter((c) => c.term === undefined).map((c) => c.text)).toEqual(["service"]);
      for (const c of columns) if (c.term !== undefined) expect(localLabels(c.term), c.text).toContain(c.text);
    }
    expect(summaryColumns(true).map((c) => c.text)).toContain("core-s");
    expect(summaryColumns(false).map((c) => c.text)).not.toContain("core-s");
  });

  it("the printed summary ends with the legend of the terms it shows, named as the glossary names them", () => {
    const text = renderSummary(summary());
    const last = text.split("\n").at(-1) ?? "";
    expect(last).toBe(
      termsLegend(
        summaryColumns(false).flatMap((c) => (c.term ? [c.term] : [])),
        summaryColumns(false),
      ),
    );
    expect(last.startsWith("terms: requests (sent), answered, failed, lost, latency percentiles (p50 ms, p99 ms), SLO, within SLO,")).toBe(
      true,
    );
    expect(last).toContain(`${glossaryTerm("backend-seconds").term} (backend-s)`);
    expect(last).toContain(glossaryTerm("peak-n").term);
    expect(last).toContain(`defined in ${GLOSSARY_SOURCE}`);
    expect(last).not.toContain("core-seconds");
    expect(last).not.toContain("not sent");
  });

  it("the legend names core-seconds and not sent when the summary shows them", () => {
    const last = renderSummary(summary(3, 42)).split("\n").at(-1) ?? "";
    expect(last).toContain("core-seconds (core-s)");
    expect(last).toContain(", not sent;");
  });

  it("counts the restarts by process on a line before the legend", () => {
    const lines = (restarts: Summary["restarts"]) => renderSummary({ ...summary(), restarts }).split("\n");
    expect(lines(undefined).some((l) => l.startsWith("restarts"))).toBe(false);
    expect(lines({ total: 0, byProcess: {}, notRestarted: [] }).at(-2)).toBe("restarts: 0");
    const some = lines({ total: 3, byProcess: { "backend-01": 2, broker: 1 }, notRestarted: [] });
    expect(some.at(-2)).toBe("restarts: 3 (backend-01 2, broker 1)");
    expect(some.at(-1)?.startsWith("terms: ")).toBe(true);
    expect(lines({ total: 0, byProcess: {}, notRestarted: ["frontend-0"] }).at(-2)).toBe(
      "restarts: 0; died and left down (--no-restart): frontend-0",
    );
  });

  it("every key of the JSON summary's rows and totals is a glossary term's local key", () => {
    const s = summary(1, 42);
    const keys = new Set(GLOSSARY.flatMap((t) => ("local" in t ? t.local.json : [])));
    const row = s.services[0] as object;
    for (const k of Object.keys(row)) if (k !== "service") expect(keys, `services[].${k}`).toContain(k);
    for (const k of Object.keys(s.totals)) expect(keys, `totals.${k}`).toContain(k);
  });
});
