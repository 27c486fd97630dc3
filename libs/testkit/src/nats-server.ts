import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export function findNatsServer(): string {
  const candidates = [process.env.NATS_SERVER_BIN, "/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"];
  for (const c of candidates) if (c && existsSync(c)) return c;
  throw new Error("nats-server not found: run `bash infra/scripts/setup.sh` (it installs Debian's nats-server) or set NATS_SERVER_BIN");
}

export interface NatsServerHandle {
  url: string;
  port: number;
  /** SIGKILL, as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same port and store (JetStream state survives). */
  restart(): Promise<void>;
  /** The server's latest output (stderr, the last 64 KiB): its errors and permission violations. */
  output(): string;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Polls until something accepts TCP connections on 127.0.0.1:port; false after `timeoutMs`. */
/**
 * Whether something accepts TCP connections on 127.0.0.1:`port` within `timeoutMs`. Each attempt gets at most a
 * second (a connect on a loaded machine can hang rather than fail); `lastError` hears why the last one failed.
 */
export async function waitForPort(port: number, timeoutMs: number, lastError?: (why: string) => void): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, "127.0.0.1");
      const timer = setTimeout(() => {
        lastError?.("connect attempt took over 1 s");
        s.destroy();
        resolve(false);
      }, 1_000);
      s.once("connect", () => {
        clearTimeout(timer);
        s.destroy();
        resolve(true);
      });
      s.once("error", (err) => {
        clearTimeout(timer);
        lastError?.(err.message);
        resolve(false);
      });
    });
    if (ok) return true;
    await sleep(50);
  }
  return false;
}

/**
 * Starts nats-server by `launch` (given the try's number, 1 first), up to `tries` times. A server that wrote its
 * ports file yet refused connections has been seen on a loaded machine (cause unknown): another process on
 * another port is tried before giving up, and every reason is kept. `launch` cleans up after its own failure.
 */
export async function launchNatsWithRetries<T>(launch: (attempt: number) => Promise<T>, tries = 3): Promise<T> {
  const problems: string[] = [];
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(attempt);
    } catch (err) {
      problems.push(err instanceof Error ? err.message : String(err));
      if (attempt >= tries) throw new Error(`nats-server did not come up in ${tries} tries:\n${problems.join("\n---\n")}`);
    }
  }
}

export interface NatsServerOptions {
  jetstream?: boolean;
  /**
   * More command-line arguments, e.g. TLS and auth:
   * `["--tlsverify", "--tlscert", cert, "--tlskey", key, "--tlscacert", ca, "--user", u, "--pass", p]`.
   * `url` stays `nats://127.0.0.1:<port>`: a client given `tls` options upgrades when the server requires it.
   */
  args?: readonly string[];
}

/**
 * A real nats-server with JetStream on a random loopback port, its store in a temp directory;
 * the port is read from the server's ports file (no guessing, no races).
 */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerHandle> {
  const bin = findNatsServer();
  const dir = mkdtempSync(join(tmpdir(), "ig-nats-"));
  let child: ChildProcess | undefined;
  let stderr = "";
  let port = -1;
  /** The JetStream store: a restart keeps it; a fresh start after a failed one gets its own. */
  let store = "store";

  const launch = async (wantPort: number) => {
    const portsDir = mkdtempSync(join(dir, "ports-"));
    const args = ["-a", "127.0.0.1", "-p", String(wantPort), "--ports_file_dir", portsDir];
    if (options.jetstream !== false) args.push("-js", "-sd", join(dir, store));
    args.push(...(options.args ?? []));
    const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
    child = proc;
    proc.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-65_536);
    });
    const end = Date.now() + 10_000;
    while (Date.now() < end) {
      if (proc.exitCode !== null) throw new Error(`nats-server exited with ${proc.exitCode}:\n${stderr}`);
      const file = readdirSync(portsDir).find((f) => f.endsWith(".ports"));
      if (file) {
        const info = JSON.parse(readFileSync(join(portsDir, file), "utf8")) as { nats: string[] };
        const url = info.nats[0] ?? "";
        port = Number(url.slice(url.lastIndexOf(":") + 1));
        let why = "";
        if (!(await waitForPort(port, 5_000, (e) => (why = e)))) {
          throw new Error(`nats-server did not accept connections on ${port} within 5 s (${why}):\n${stderr.slice(-600)}`);
        }
        return;
      }
      await sleep(25);
    }
    proc.kill("SIGKILL");
    throw new Error(`nats-server wrote no ports file within 10 s:\n${stderr}`);
  };

  const terminate = async (signal: NodeJS.Signals) => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    proc.kill(signal);
    await Promise.race([exited, sleep(5_000).then(() => proc.kill("SIGKILL"))]);
    await exited;
  };

  await launchNatsWithRetries(async (attempt) => {
    store = attempt === 1 ? "store" : `store-${attempt}`;
    try {
      await launch(-1);
    } catch (err) {
      await terminate("SIGKILL");
      throw err;
    }
  });
  const handle: NatsServerHandle = {
    output: () => stderr,
    get url() {
      return `nats://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    kill: () => terminate("SIGKILL"),
    restart: async () => {
      await terminate("SIGTERM");
      await launch(port);
    },
    stop: async () => {
      await terminate("SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
    [Symbol.asyncDispose]: () => handle.stop(),
  };
  return handle;
}
