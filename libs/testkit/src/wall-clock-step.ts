import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** What a process given `wallClockStepArgs` prints (a JSON log line) once its wall clock has stepped. */
export const WALL_CLOCK_STEPPED = "test: wall clock stepped";

/**
 * Node flags that load a module into a service's process: on SIGUSR2 its wall clock (`Date.now`) steps by
 * `stepMs` (negative: back), as an NTP correction or `date -s` steps a node's; the monotonic clock
 * (`performance.now`) goes on. It then prints a log line whose `msg` is WALL_CLOCK_STEPPED. The module is
 * written into `dir`.
 */
export function wallClockStepArgs(dir: string, stepMs: number): string[] {
  const file = join(dir, "wall-clock-step.mjs");
  writeFileSync(
    file,
    `const realNow = Date.now;
let offset = 0;
process.on("SIGUSR2", () => {
  offset += ${JSON.stringify(stepMs)};
  process.stdout.write(JSON.stringify({ level: 30, msg: ${JSON.stringify(WALL_CLOCK_STEPPED)}, offset }) + "\\n");
});
Date.now = () => realNow() + offset;
`,
  );
  return ["--import", pathToFileURL(file).href];
}
