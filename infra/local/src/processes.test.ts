import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startLoggedService } from "./processes.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("startLoggedService", () => {
  it("waits for the restarted process's own ready line, not its predecessor's left in the same log", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ig-processes-"));
    dirs.push(dir);
    // A real child: it announces readiness only after 400 ms, with its own pid.
    const script = join(dir, "svc.mjs");
    writeFileSync(
      script,
      'setTimeout(() => { console.log(JSON.stringify({ event: "ready", pid: String(process.pid) })); }, 400); setInterval(() => {}, 1000);\n',
    );
    const spawn = { name: "svc", command: process.execPath, args: [script], env: {}, logDir: dir, readyTimeoutMs: 10_000 };
    const first = await startLoggedService(spawn);
    expect(first.ready.pid).toBe(String(first.pid));
    await first.stop(2000);
    const second = await startLoggedService(spawn);
    try {
      expect(second.pid).not.toBe(first.pid);
      expect(second.ready.pid).toBe(String(second.pid));
    } finally {
      await second.stop(2000);
    }
  });
});
