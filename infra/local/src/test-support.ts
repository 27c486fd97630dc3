/**
 * For the integration tests: the compiled CLI run as a newcomer runs it, its --summary-json read back, and
 * what is needed to check that nothing it started is left running. A test that fails or times out stops the
 * CLI it started with `stopStrayRuns` (SIGTERM: the CLI stops its processes in order; SIGKILL after).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { repoRoot } from "@infergrid/testkit";

export const cli = join(repoRoot, "infra", "local", "dist", "main.js");

export interface CliRun<S> {
  code: number | null;
  stdout: string;
  stderr: string;
  summary: S;
}

const running = new Set<ChildProcess>();

/** Runs the CLI with `args` (plus --summary-json and --runtime-dir inside `dir`); rejects if it wrote no summary. */
export function runCli<S>(
  dir: string,
  args: string[],
  opts: { interruptAfterLoadMs?: number; onLine?: (line: string, pid: number) => void } = {},
): Promise<CliRun<S>> {
  const summaryPath = join(dir, `summary-${Date.now()}.json`);
  const child: ChildProcess = spawn(
    process.execPath,
    [cli, ...args, "--summary-json", summaryPath, "--runtime-dir", join(dir, "runs"), "--console-port", "0"],
    {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  running.add(child);
  let stdout = "";
  let stderr = "";
  let partial = "";
  child.stdout?.on("data", (d: Buffer) => {
    stdout += d.toString();
    if (opts.onLine) {
      const lines = (partial + d.toString()).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) opts.onLine(line, child.pid ?? 0);
    }
    if (opts.interruptAfterLoadMs !== undefined && stdout.includes("load running\n")) {
      const wait = opts.interruptAfterLoadMs;
      opts.interruptAfterLoadMs = undefined;
      setTimeout(() => child.kill("SIGINT"), wait);
    }
  });
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => {
      running.delete(child);
      if (!existsSync(summaryPath)) {
        reject(new Error(`no summary (exit ${code}):\n${stdout}\n${stderr}`));
        return;
      }
      resolve({ code, stdout, stderr, summary: JSON.parse(readFileSync(summaryPath, "utf8")) as S });
    });
  });
}

/** The CLI with bad options: its exit code and what it printed (no summary is written). */
export function runCliRefused(args: string[]): { code: number | null; stderr: string } {
  try {
    execFileSync(process.execPath, [cli, ...args], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" });
    return { code: 0, stderr: "" };
  } catch (err) {
    const e = err as { status: number | null; stderr: string };
    return { code: e.status, stderr: e.stderr };
  }
}

/** A fresh directory for a test file's runs; the CLI must be built. */
export function freshRunDir(prefix: string): string {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npx tsc -b)`);
  return mkdtempSync(join(tmpdir(), prefix));
}

/** After a test file: stops any CLI still running (a failed or timed-out test), then removes its directory. */
export async function removeRunDir(dir: string | undefined): Promise<void> {
  await stopStrayRuns();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
}

/** After a failed or timed-out test: each CLI still running is asked to stop (it stops its processes), then killed. */
export async function stopStrayRuns(timeoutMs = 15_000): Promise<void> {
  for (const c of running) c.kill("SIGTERM");
  const end = Date.now() + timeoutMs;
  while (running.size > 0 && Date.now() < end) await sleep(100);
  for (const c of running) c.kill("SIGKILL");
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Processes whose command line mentions `text` (other sessions' services may run on this machine). */
export function processesMentioning(text: string): string[] {
  try {
    return execFileSync("pgrep", ["-af", text], { encoding: "utf8" })
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.includes("pgrep"));
  } catch {
    return []; // pgrep exits 1 when nothing matches.
  }
}

/** Whether something accepts TCP connections at host:port (a backend still serving). */
export function accepts(address: string, timeoutMs = 1_000): Promise<boolean> {
  const colon = address.lastIndexOf(":");
  return new Promise((resolve) => {
    const socket = connect({ host: address.slice(0, colon), port: Number(address.slice(colon + 1)) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** The pid of the CLI's child whose INFERGRID_ID is `id` (read from /proc: the CLI starts every service). */
export function childWithId(cliPid: number, id: string): number | undefined {
  let pids: string[];
  try {
    pids = execFileSync("pgrep", ["-P", String(cliPid)], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean);
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    try {
      const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      if (env.includes(`INFERGRID_ID=${id}`)) return Number(pid);
    } catch {
      // exited meanwhile
    }
  }
  return undefined;
}
