import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alive, type CliRun, childWithId, freshRunDir, processesMentioning, removeRunDir, runCli } from "./test-support.js";

/**
 * The supervisor on real processes: `npm start`'s CLI (compiled dist/, nats-server and every service), a
 * backend, a frontend and the broker killed with SIGKILL mid-run. Each is started again under the same id
 * with a new pid (the broker on its first port, or the load could not reach it), requests go on being
 * answered, the summary counts the restarts, and nothing is left running once the CLI has exited.
 */

interface SummaryJson {
  interrupted: boolean;
  restarts: { total: number; byProcess: Record<string, number>; notRestarted: string[] };
  services: Array<{ service: string; sent: number; answered: number; failed: number; lost: number }>;
  totals: { sent: number; answered: number; failed: number; lost: number };
  processes: Array<{ name: string; pid: number; pids: number[]; restarts: number; log: string }>;
}

const VICTIMS = ["backend-00", "frontend-0", "broker"];

let dir: string;

beforeAll(() => {
  dir = freshRunDir("ig-restart-");
});

afterAll(() => removeRunDir(dir));

async function waitFor<T>(what: string, timeoutMs: number, check: () => T | undefined): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** Answered so far per service, from the CLI's progress lines (printed every 5 s off a terminal) from `from` on. */
function answeredSoFar(lines: readonly string[], from: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of lines.slice(from)) {
    const m = /^\[\d+:\d+\/\d+:\d+\] ([a-z0-9-]+): .* answered (\d+), failed/.exec(l);
    if (m) out.set(m[1] ?? "", Number(m[2]));
  }
  return out;
}

const readyLines = (log: string) =>
  readFileSync(log, "utf8")
    .split("\n")
    .filter((l) => l.includes('"event":"ready"'))
    .map((l) => JSON.parse(l) as { id: string; grpcAddress: string });

describe("the local cluster's supervisor (npm start, real processes)", () => {
  it("restarts a killed backend, frontend and broker under their ids, keeps answering, and counts it", { timeout: 120_000 }, async () => {
    const lines: string[] = [];
    let cliPid = 0;
    const run: Promise<CliRun<SummaryJson>> = runCli<SummaryJson>(
      dir,
      ["--duration", "25", "--backends", "4", "--frontends", "2", "--no-onnx", "--peak-rps", "20"],
      {
        onLine: (line, pid) => {
          cliPid = pid;
          lines.push(line);
        },
      },
    );
    run.catch(() => {});

    await waitFor("the load to run", 60_000, () => (lines.includes("load running") ? true : undefined));
    await sleep(3_000);
    const before = new Map<string, number>();
    for (const id of VICTIMS) {
      const pid = childWithId(cliPid, id);
      expect(pid, `pid of ${id}`).toBeDefined();
      before.set(id, pid ?? 0);
    }
    for (const pid of before.values()) process.kill(pid, "SIGKILL");

    // Each death and restart is on the live progress, with how it died and the wait (1 s: the first restart).
    for (const [id, pid] of before) {
      await waitFor(`${id} restarted`, 20_000, () => (lines.some((l) => l.includes(`${id} restarted (pid `)) ? true : undefined));
      const died = new RegExp(`^  ${id} \\(pid ${pid}\\) killed by SIGKILL after [0-9.]+ s; restart 1 in 1\\.0 s$`);
      expect(lines.filter((l) => died.test(l)).length, `${id}'s death on the progress`).toBe(1);
    }
    // What was answered once all three were back: the next progress line of each service.
    const restartedAt = lines.length;
    const answeredAtRestart = await waitFor("a progress line after the restarts", 15_000, () => {
      const m = answeredSoFar(lines, restartedAt);
      return m.size === 2 ? m : undefined;
    });
    // Same id, another process.
    for (const [id, old] of before) {
      const now = childWithId(cliPid, id);
      expect(now, `${id} runs again`).toBeDefined();
      expect(now).not.toBe(old);
      expect(alive(old)).toBe(false);
    }

    const { code, stdout, stderr, summary } = await run;
    expect(code, stderr).toBe(0);

    // Requests went on being answered after the restarts, and every one is accounted for.
    expect(summary.totals.lost).toBe(0);
    expect(summary.totals.answered + summary.totals.failed).toBe(summary.totals.sent);
    for (const s of summary.services) {
      expect(s.answered, `${s.service} answered after the restarts`).toBeGreaterThanOrEqual((answeredAtRestart.get(s.service) ?? 0) + 5);
    }
    console.log(
      `restart test: ${summary.services.map((s) => `${s.service} answered ${answeredAtRestart.get(s.service)} once restarted, ${s.answered} in all (${s.failed} failed)`).join("; ")}`,
    );

    // The summary counts them, by process, in its text and its JSON.
    expect(summary.restarts.total).toBe(3);
    expect(summary.restarts.byProcess).toEqual({ "backend-00": 1, "frontend-0": 1, broker: 1 });
    expect(summary.restarts.notRestarted).toEqual([]);
    expect(stdout).toMatch(/^restarts: 3 \((backend-00 1|frontend-0 1|broker 1)(, (backend-00 1|frontend-0 1|broker 1)){2}\)$/m);
    for (const id of VICTIMS) {
      const p = summary.processes.find((x) => x.name === id);
      expect(p?.restarts, id).toBe(1);
      expect(p?.pids[0], id).toBe(before.get(id));
      expect(p?.pids.length, id).toBe(2);
      // Same log file, appended to: two ready lines of the same id.
      const ready = readyLines(p?.log ?? "");
      expect(ready.map((r) => r.id)).toEqual([id, id]);
      // The broker came back at its first address, which the load generator holds.
      if (id === "broker") expect(ready[1]?.grpcAddress).toBe(ready[0]?.grpcAddress);
    }

    // Nothing left behind: every pid any process ran as is gone.
    expect(summary.processes.flatMap((p) => p.pids).filter(alive)).toEqual([]);
    expect(processesMentioning(dir)).toEqual([]);
    expect(stdout).toContain("all processes stopped (0 left)");
  });
});
