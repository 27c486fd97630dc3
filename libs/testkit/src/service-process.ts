import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { SERVICE_NODE_FLAGS } from "@infergrid/runtime";

/** The repository root, from this file (src/ or dist/ of libs/testkit). */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

export type ServiceName = "broker" | "frontend" | "backend-worker" | "predictor" | "global-allocator" | "console";

export function serviceEntry(name: ServiceName): string {
  return join(repoRoot, "services", name, "dist", "main.js");
}

export interface LogLine {
  level?: number;
  msg?: string;
  event?: string;
  [key: string]: unknown;
}

export interface ServiceProcess {
  name: string;
  pid: number;
  /** Fields of the service's `ready` line: grpcAddress, httpAddress, metricsAddress, id ... */
  ready: Record<string, string>;
  logs: LogLine[];
  exited: Promise<number | null>;
  isRunning(): boolean;
  /** SIGTERM (graceful), SIGKILL after `timeoutMs`. */
  stop(timeoutMs?: number): Promise<void>;
  /** SIGKILL, as a crash would. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: a process that hangs without dying. */
  pause(): void;
  resume(): void;
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  [Symbol.asyncDispose](): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const c of running) c.kill("SIGKILL");
});

export interface StartServiceOptions {
  name?: string;
  args?: string[];
  /** Options for node itself after the services' own (SERVICE_NODE_FLAGS), before the entry (e.g. `--cpu-prof`, which NODE_OPTIONS may not carry). */
  nodeArgs?: string[];
  env?: Record<string, string>;
  readyTimeoutMs?: number;
  /** Echo the service's log lines to this process's stderr (debugging). */
  echo?: boolean;
}

/** Starts a compiled service as a real process and waits for its `ready` line. */
export async function startService(service: ServiceName | { entry: string }, options: StartServiceOptions = {}): Promise<ServiceProcess> {
  const entry = typeof service === "string" ? serviceEntry(service) : service.entry;
  const name = options.name ?? (typeof service === "string" ? service : entry);
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, ...(options.nodeArgs ?? []), entry, ...(options.args ?? [])], {
    env: { ...process.env, INFERGRID_LOG_LEVEL: "info", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  const logs: LogLine[] = [];
  const raw: string[] = [];
  const waiters = new Set<{ predicate: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>();
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  const onLine = (line: string) => {
    raw.push(line);
    if (raw.length > 200) raw.shift();
    if (options.echo) process.stderr.write(`[${name}] ${line}\n`);
    let parsed: LogLine;
    try {
      parsed = JSON.parse(line) as LogLine;
    } catch {
      return;
    }
    logs.push(parsed);
    if (logs.length > 5000) logs.shift();
    for (const w of waiters) {
      if (w.predicate(parsed)) {
        waiters.delete(w);
        w.resolve(parsed);
      }
    }
  };
  createInterface({ input: child.stdout! }).on("line", onLine);
  createInterface({ input: child.stderr! }).on("line", onLine);

  const waitForLog = (predicate: (l: LogLine) => boolean, timeoutMs = 10_000): Promise<LogLine> => {
    const seen = logs.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise<LogLine>((resolve, reject) => {
      const w = { predicate, resolve };
      waiters.add(w);
      const timer = setTimeout(() => {
        waiters.delete(w);
        reject(new Error(`${name}: expected log line not seen within ${timeoutMs} ms; last lines:\n${raw.slice(-30).join("\n")}`));
      }, timeoutMs);
      const orig = w.resolve;
      w.resolve = (l) => {
        clearTimeout(timer);
        orig(l);
      };
    });
  };

  const terminate = async (signal: NodeJS.Signals, timeoutMs: number) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const done = await Promise.race([exited.then(() => true), sleep(timeoutMs).then(() => false)]);
    if (!done) {
      child.kill("SIGKILL");
      await exited;
    }
  };

  const readyLine = await Promise.race([
    waitForLog((l) => l.event === "ready", options.readyTimeoutMs ?? 60_000),
    exited.then((code) => {
      throw new Error(`${name} exited with ${code} before it was ready:\n${raw.slice(-30).join("\n")}`);
    }),
  ]).catch(async (err: unknown) => {
    await terminate("SIGKILL", 1000);
    throw err;
  });
  const ready = Object.fromEntries(Object.entries(readyLine).filter((e): e is [string, string] => typeof e[1] === "string"));

  const handle: ServiceProcess = {
    name,
    pid: child.pid ?? -1,
    ready,
    logs,
    exited,
    isRunning: () => child.exitCode === null && child.signalCode === null,
    stop: (timeoutMs = 10_000) => terminate("SIGTERM", timeoutMs),
    kill: () => terminate("SIGKILL", 5_000),
    pause: () => child.kill("SIGSTOP"),
    resume: () => child.kill("SIGCONT"),
    waitForLog,
    [Symbol.asyncDispose]: () => handle.stop(),
  };
  return handle;
}

/** Polls `check` until it returns a value that is not undefined, or fails with `what`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
  everyMs = 100,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < end) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      lastError = err;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
}

/**
 * Waits for every start to end (none is left half-started); if any failed, stops the ones that
 * came up and throws the first failure, so a failed set-up leaves no process behind.
 */
export async function startAll(starts: readonly Promise<ServiceProcess>[]): Promise<ServiceProcess[]> {
  const results = await Promise.allSettled(starts);
  const up = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    await Promise.all(up.map((p) => p.kill()));
    throw failed.reason;
  }
  return up;
}
