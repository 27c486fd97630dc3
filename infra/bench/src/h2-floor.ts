/**
 * The floor under the data path's hops: the same topology as `bench:datapath` (a client, two forwarding
 * processes, a server; against the client calling the server directly) built from bare node:http2, without
 * gRPC, protobuf or any of the system's code. What a hop of this system costs above what it costs here is the
 * system's; what it costs here is Node's, the kernel's and the machine's. Closed loop for throughput, then open loops at fixed
 * rates, since a hop's CPU per request grows as its rate falls (fewer requests share each wake-up).
 *
 *   npm run bench:h2-floor -- --payloads tiny,image --rates 100,400
 */
import { type ChildProcess, fork } from "node:child_process";
import http2 from "node:http2";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { closedLoop } from "./closed-loop.js";
import { CpuMeter, processCpuMs, selfCpuMs } from "./cpu-meter.js";
import { openLoop } from "./open-loop.js";

/** Request bodies as the data path's gRPC messages of the same payloads are long (5-byte prefix included). */
const PAYLOADS: Record<string, number> = { tiny: 28, tokens: 16_400, image: 602_130 };

const program = new Command()
  .name("bench:h2-floor")
  .option("--duration <seconds>", "measured seconds per path and load", "10")
  .option("--warmup <seconds>", "unmeasured seconds before each", "2")
  .option("--concurrency <n>", "requests in flight (closed loop)", "32")
  .option("--payloads <list>", `comma-separated, of ${Object.keys(PAYLOADS).join(", ")}`, "tiny,image")
  .option("--rates <list>", "open-loop rates of the forwarded path, requests a second (empty: none)", "100,400")
  .option("--store <list>", "proxies (1, 2) that forward a body once all of it has arrived instead of as it arrives", "")
  .parse();
const opts = program.opts<{ duration: string; warmup: string; concurrency: string; payloads: string; rates: string; store: string }>();
const durationMs = Number(opts.duration) * 1000;
const warmupMs = Number(opts.warmup) * 1000;
const concurrency = Number(opts.concurrency);
const payloads = opts.payloads.split(",").map((p) => p.trim());
const rates = opts.rates.split(",").filter(Boolean).map(Number);
if (!(durationMs > 0 && warmupMs >= 0 && Number.isInteger(concurrency) && concurrency > 0)) {
  program.error("--duration and --concurrency must be positive numbers, --warmup non-negative");
}
for (const p of payloads) if (!(p in PAYLOADS)) program.error(`--payloads: unknown payload ${JSON.stringify(p)}`);
if (!rates.every((r) => r > 0)) program.error(`--rates: every rate must be a positive number, got ${JSON.stringify(opts.rates)}`);
const store = new Set(opts.store.split(",").filter(Boolean));
for (const p of store) if (p !== "1" && p !== "2") program.error(`--store: proxies are 1 and 2, got ${JSON.stringify(p)}`);
const proxyMode = (n: string) => (store.has(n) ? ["store"] : []);

const SESSION = { maxSessionMemory: 256, settings: { initialWindowSize: 4 * 1024 * 1024 } };
const node = fileURLToPath(new URL("./h2-floor-node.js", import.meta.url));
const children: ChildProcess[] = [];
async function start(args: string[]): Promise<ChildProcess> {
  const child = fork(node, args, { stdio: "inherit" });
  children.push(child);
  await new Promise((ready, failed) => {
    child.once("message", ready);
    child.once("exit", (code) => failed(new Error(`${args.join(" ")} exited with ${code}`)));
  });
  return child;
}

const base = 42_000 + Math.floor(Math.random() * 1000) * 3;
try {
  const server = await start(["server", String(base)]);
  const second = await start(["proxy", String(base + 1), String(base), ...proxyMode("2")]);
  const first = await start(["proxy", String(base + 2), String(base + 1), ...proxyMode("1")]);
  const meter = new CpuMeter(
    new Map([
      ["client", selfCpuMs],
      ["proxy 1", () => processCpuMs(first.pid ?? 0)],
      ["proxy 2", () => processCpuMs(second.pid ?? 0)],
      ["server", () => processCpuMs(server.pid ?? 0)],
    ]),
  );
  const per = (requests: number) =>
    ["client", "proxy 1", "proxy 2", "server"].map((n) => meter.usPerRequest(n, requests).toFixed(0)).join(" / ");
  const sessions = {
    direct: http2.connect(`http://127.0.0.1:${base}`, SESSION),
    forwarded: http2.connect(`http://127.0.0.1:${base + 2}`, SESSION),
  };
  console.log(
    `\nbare node:http2 (node ${process.version}): closed loop at concurrency ${concurrency}, then open loops; ${opts.duration} s each; ` +
      `proxies forwarding bodies whole: ${store.size === 0 ? "none" : [...store].sort().join(", ")}`,
  );
  console.log("| payload | path | load | req/s | p99 ms | CPU µs/req: client / proxy 1 / proxy 2 / server |");
  console.log("|---|---|---|---|---|---|");
  for (const payload of payloads) {
    const body = Buffer.alloc(PAYLOADS[payload] ?? 0, 1);
    for (const [path, session] of Object.entries(sessions)) {
      const call = () =>
        new Promise<void>((done, failed) => {
          const r = session.request({ ":method": "POST", ":path": "/x" });
          r.on("data", () => {});
          r.on("end", done);
          r.on("error", failed);
          r.end(body);
        });
      const closed = await closedLoop(call, concurrency, warmupMs, durationMs, meter.window);
      console.log(
        `| ${payload} | ${path} | closed | ${closed.perSecond.toFixed(0)} | ${closed.p99Ms.toFixed(1)} | ${per(closed.requests)} |`,
      );
      for (const rate of path === "forwarded" ? rates : []) {
        const open = await openLoop(call, rate, warmupMs, durationMs, meter.window);
        console.log(`| ${payload} | ${path} | ${rate}/s | ${rate} | ${open.p99Ms.toFixed(1)} | ${per(open.sent)} |`);
      }
    }
  }
  for (const s of Object.values(sessions)) s.close();
} finally {
  for (const c of children) c.kill();
}
