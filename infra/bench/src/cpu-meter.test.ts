import { describe, expect, it } from "vitest";
import { CpuMeter, processCpuMs, selfCpuMs } from "./cpu-meter.js";

describe("CpuMeter", () => {
  it("reads a process's CPU time from /proc as the process itself counts it", () => {
    const meter = new CpuMeter(
      new Map([
        ["proc", () => processCpuMs(process.pid)],
        ["self", selfCpuMs],
      ]),
    );
    meter.start();
    // Burn CPU (not wall time): the two readings of the same process must agree to the kernel's tick.
    const until = selfCpuMs() + 300;
    let x = 0;
    while (selfCpuMs() < until) x += Math.sqrt(x + 1);
    meter.stop();
    expect(x).toBeGreaterThan(0);
    expect(meter.usedMs("self")).toBeGreaterThanOrEqual(300);
    expect(Math.abs(meter.usedMs("proc") - meter.usedMs("self"))).toBeLessThan(60);
    expect(meter.usedMs("unknown")).toBeNaN();
    expect(meter.usPerRequest("self", 100)).toBeCloseTo((meter.usedMs("self") * 1000) / 100);
    expect(meter.usPerRequest("self", 0)).toBeCloseTo(meter.usedMs("self") * 1000);
  });
});
