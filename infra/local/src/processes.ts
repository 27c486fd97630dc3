import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { launchNatsWithRetries, waitForPort } from "@infergrid/testkit";

/**
 * Child processes of the local cluster. Unlike the test launchers, each child writes its log
 * straight to a file (no pipe through this process, so a chatty service costs nothing here) and
 * runs in its own process group: Ctrl-C in the terminal reaches only the CLI, which then stops
 * the load first and the services after, in order, instead of every process dying at once.
 */
export interface ChildHandle {
  name: string;
  pid: number;
  logPath: string;
  /** Fields of the service's `ready` line: grpcAddress, httpAddress, id ... */
  ready: Record<string, string>;
  isRunning(): boolean;
  /** How the process ended (undefined while it runs). */
  exitStatus(): ExitStatus | undefined;
  exited: Promise<void>;
  /** SIGTERM, then SIGKILL after `timeoutMs`. */
  stop(timeoutMs: number): Promise<void>;
  kill(): void;
}

/** An exit code, or the signal that ended the process. */
export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const live = new Set<ChildProcess>();

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    // Negative pid: the whole group, should a service ever spawn helpers of its own.
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // Already gone.
    }
  }
}

/**
 * After the leader of a child's process group died on its own: SIGKILL to what is left of the group (a crashed
 * allocator's pool backends), as a restarted Pod takes all its processes with it. Called as soon as the exit
 * is seen: the group id cannot be taken by a new process while any member is left, and none is started here
 * between the exit and this call.
 */
export function killLeftovers(pid: number): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // No process is left in the group.
  }
}

/** Last resort when the CLI exits without a clean stop (an exception, a second Ctrl-C): nothing is left behind. */
export function killAllChildren(): void {
  for (const c of live) killGroup(c, "SIGKILL");
}
process.once("exit", killAllChildren);

export function liveChildren(): number {
  return live.size;
}

function lastLines(path: string, n: number): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-n).join("\n");
  } catch {
    return "";
  }
}

function track(child: ChildProcess): Promise<void> {
  live.add(child);
  return new Promise<void>((resolve) => {
    child.once("exit", () => {
      live.delete(child);
      resolve();
    });
    // A spawn failure (ENOENT) emits error and no exit.
    child.once("error", () => {
      live.delete(child);
      resolve();
    });
  });
}

function handle(name: string, child: ChildProcess, logPath: string, exited: Promise<void>, ready: Record<string, string>): ChildHandle {
  const isRunning = () => child.exitCode === null && child.signalCode === null && live.has(child);
  return {
    name,
    pid: child.pid ?? -1,
    logPath,
    ready,
    isRunning,
    exitStatus: () =>
      child.exitCode === null && child.signalCode === null ? undefined : { code: child.exitCode, signal: child.signalCode },
    exited,
    kill: () => killGroup(child, "SIGKILL"),
    stop: async (timeoutMs) => {
      if (!isRunning()) return;
      killGroup(child, "SIGTERM");
      const done = await Promise.race([exited.then(() => true), sleep(timeoutMs).then(() => false)]);
      if (!done) {
        killGroup(child, "SIGKILL");
        await exited;
      }
    },
  };
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  logDir: string;
}

function spawnLogged(o: SpawnOptions): { child: ChildProcess; logPath: string; exited: Promise<void>; startOffset: number } {
  mkdirSync(o.logDir, { recursive: true });
  const logPath = join(o.logDir, `${o.name}.log`);
  const fd = openSync(logPath, "a");
  // A restarted service appends to its predecessor's log: only what it writes from here is its own.
  const startOffset = fstatSync(fd).size;
  const child = spawn(o.command, o.args, {
    env: { ...process.env, ...o.env },
    stdio: ["ignore", fd, fd],
    detached: true,
  });
  // The child has its own copy of the descriptor.
  closeSync(fd);
  return { child, logPath, exited: track(child), startOffset };
}

/**
 * Starts `node <entry>` and waits for the JSON line with `"event":"ready"` in its log (services
 * print it whatever their log level), whose string fields are the bound addresses. Aborting `signal`
 * (the cluster stops while a restarted service comes up) kills it and rejects.
 */
export async function startLoggedService(o: SpawnOptions & { readyTimeoutMs: number; signal?: AbortSignal }): Promise<ChildHandle> {
  const { child, logPath, exited, startOffset } = spawnLogged(o);
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const fd = openSync(logPath, "r");
  let offset = startOffset;
  let partial = "";
  const buf = Buffer.alloc(64 * 1024);
  const end = Date.now() + o.readyTimeoutMs;
  try {
    while (Date.now() < end) {
      if (o.signal?.aborted) throw new Error(`${o.name}: start abandoned (the cluster is stopping)`);
      for (;;) {
        const n = readSync(fd, buf, 0, buf.length, offset);
        if (n <= 0) break;
        offset += n;
        partial += buf.subarray(0, n).toString("utf8");
      }
      const lines = partial.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        if (!line.includes('"ready"')) continue;
        let parsed: Record<string, unknown>;
        try {
          parsed = JSON.parse(line) as Record<string, unknown>;
        } catch {
          continue;
        }
        if (parsed.event !== "ready") continue;
        const ready = Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === "string"));
        return handle(o.name, child, logPath, exited, ready);
      }
      if (gone) {
        throw new Error(
          `${o.name} exited (code ${child.exitCode ?? child.signalCode}) before it was ready; ${logPath}:\n${lastLines(logPath, 20)}`,
        );
      }
      await sleep(50);
    }
    killGroup(child, "SIGKILL");
    throw new Error(`${o.name} printed no ready line within ${o.readyTimeoutMs} ms; ${logPath}:\n${lastLines(logPath, 20)}`);
  } catch (err) {
    killGroup(child, "SIGKILL");
    await exited;
    throw err;
  } finally {
    closeSync(fd);
  }
}

/** nats-server's handle; `relaunch()` starts it again on the same port with the same JetStream store. */
export type NatsHandle = ChildHandle & { url: string; relaunch(): Promise<NatsHandle> };

/**
 * nats-server with JetStream on a free loopback port (read back from its ports file), its store
 * in the run directory, in its own process group like the services (see above). `wantPort` is -1
 * (any free port) but for a restart, which takes the first start's port: the services reconnect to it.
 */
async function launchLoggedNats(
  bin: string,
  runDir: string,
  attempt: number,
  extraArgs: readonly string[],
  wantPort = -1,
): Promise<NatsHandle> {
  const portsDir = join(runDir, `nats-ports-${attempt}`);
  // A restart's ports file, not the one a killed server left.
  rmSync(portsDir, { recursive: true, force: true });
  mkdirSync(portsDir, { recursive: true });
  const { child, logPath, exited } = spawnLogged({
    name: "nats-server",
    command: bin,
    args: [
      "-a",
      "127.0.0.1",
      "-p",
      String(wantPort),
      "--ports_file_dir",
      portsDir,
      "-js",
      "-sd",
      join(runDir, attempt === 1 ? "nats-store" : `nats-store-${attempt}`),
      ...extraArgs,
    ],
    env: {},
    logDir: runDir,
  });
  const end = Date.now() + 10_000;
  try {
    while (Date.now() < end) {
      if (child.exitCode !== null || !live.has(child)) throw new Error(`nats-server exited early; ${logPath}:\n${lastLines(logPath, 20)}`);
      const file = readdirSync(portsDir).find((f) => f.endsWith(".ports"));
      if (file) {
        const info = JSON.parse(readFileSync(join(portsDir, file), "utf8")) as { nats?: string[] };
        const url = info.nats?.[0] ?? "";
        const port = Number(url.slice(url.lastIndexOf(":") + 1));
        // A loaded machine (the test suite runs beside it) can take seconds between the ports file and the listener.
        let why = "";
        if (!(await waitForPort(port, 20_000, (e) => (why = e)))) {
          const state = child.exitCode === null ? "still running" : `exited with ${child.exitCode}`;
          throw new Error(
            `nats-server (${state}) does not accept connections on 127.0.0.1:${port} (${why}; ports file ${file}: ${JSON.stringify(info)}); ${logPath}:\n${lastLines(logPath, 20)}`,
          );
        }
        return {
          ...handle("nats-server", child, logPath, exited, {}),
          url: `nats://127.0.0.1:${port}`,
          relaunch: () => launchLoggedNats(bin, runDir, attempt, extraArgs, port),
        };
      }
      await sleep(25);
    }
    throw new Error(`nats-server wrote no ports file within 10 s; ${logPath}:\n${lastLines(logPath, 20)}`);
  } catch (err) {
    killGroup(child, "SIGKILL");
    await exited;
    throw err;
  }
}

/**
 * nats-server as above, tried again on another port if it does not come up (`launchNatsWithRetries`);
 * `extraArgs`: more of its options (`-c <file>` with the users and their permissions).
 */
export function startLoggedNats(bin: string, runDir: string, extraArgs: readonly string[] = []): Promise<NatsHandle> {
  return launchNatsWithRetries((attempt) => launchLoggedNats(bin, runDir, attempt, extraArgs));
}

/** Sends `signal` to every child still running (Ctrl-C while the cluster is starting). */
export function signalAllChildren(signal: NodeJS.Signals): void {
  for (const c of live) killGroup(c, signal);
}
