import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const n = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    ticksPerSecond = Number.isFinite(n) && n > 0 ? n : 100;
  }
  return ticksPerSecond;
}

/** CPU time (user + system) a process has used so far, in ms, from Linux's /proc/<pid>/stat. */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may hold spaces: state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks();
}

/** This process's CPU time so far, in ms. */
export function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** CPU used by each named process over a window: `start`, then `stop` gives ms per name. */
export class CpuMeter {
  private before = new Map<string, number>();
  private after = new Map<string, number>();

  constructor(private readonly readers: ReadonlyMap<string, () => number>) {}

  start(): void {
    for (const [name, read] of this.readers) this.before.set(name, read());
  }

  stop(): void {
    for (const [name, read] of this.readers) this.after.set(name, read());
  }

  usedMs(name: string): number {
    return (this.after.get(name) ?? Number.NaN) - (this.before.get(name) ?? Number.NaN);
  }

  /** CPU µs a process used per request over the last window, `requests` having been served in it. */
  usPerRequest(name: string, requests: number): number {
    return (this.usedMs(name) * 1000) / Math.max(1, requests);
  }

  /** The window as the load loops take it (closedLoop's and openLoop's `window`). */
  readonly window = { onStart: () => this.start(), onEnd: () => this.stop() };
}
