import { describe, expect, it } from "vitest";
import { type LiveFrame, LiveView, renderFrame, renderLines, screenRows } from "./live-view.js";
import { ServiceStats } from "./stats.js";

function frame(): LiveFrame {
  const s = new ServiceStats("resnet34", 720, 0.99);
  for (let i = 0; i < 10; i++) s.onAnswered(s.onSent(1_000 + i * 100), 150, 1_050 + i * 100);
  return {
    elapsedMs: 65_000,
    totalMs: 240_000,
    inFlight: 3,
    rows: [{ service: "resnet34", sloMs: 720, live: s.live(2_500, 1), totals: s.totals(), inUse: 2, occupied: 3 }],
  };
}

describe("live view", () => {
  it("shows elapsed/total, and per service rate, backends in use, latency, SLO attainment and totals", () => {
    const text = renderFrame(frame());
    expect(text).toContain("1:05 / 4:00");
    expect(text).toContain("3 in flight");
    expect(text).toMatch(/│ resnet34\s+│ 10\.0\s+│ 2\s+│ 3\s+│ 150\s+│ 150\s+│ 100\.0% \(<=720\)\s+│ 10\s+│ 10\s+│ 0\s+│/);
    expect(renderLines(frame())).toBe(
      "[1:05/4:00] resnet34: 10.0 req/s, n=2, warm=3, p50 150 ms, p99 150 ms, within SLO 100.0%; sent 10, answered 10, failed 0",
    );
  });

  it("prints a line of news above the frame on a terminal, and as a plain line elsewhere", () => {
    const written: string[] = [];
    const out = (isTTY: boolean) => ({ isTTY, columns: 200, write: (s: string) => written.push(s) }) as unknown as NodeJS.WriteStream;
    const tty = new LiveView(out(true), frame);
    tty.start();
    tty.print("backend-01 restarted");
    // Nothing drawn yet: the line, then the frame below it.
    expect(written[0]).toBe("backend-01 restarted\n");
    const rows = screenRows(renderFrame(frame()), 200);
    tty.print("broker restarted");
    tty.stop();
    // Up over the frame, cleared, the line, the frame again.
    expect(written[2]).toBe(`\x1b[${rows}F\x1b[0Jbroker restarted\n`);
    expect(written[3]).toBe(`${renderFrame(frame())}\n`);
    written.length = 0;
    new LiveView(out(false), frame).print("frontend-0 restarted");
    expect(written).toEqual(["frontend-0 restarted\n"]);
  });

  it("knows how many terminal rows a frame takes, wrapped lines included", () => {
    expect(screenRows("abc\ndef", 80)).toBe(2);
    expect(screenRows("x".repeat(100), 40)).toBe(3);
    expect(screenRows("x".repeat(100), undefined)).toBe(1);
  });
});
