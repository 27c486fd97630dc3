import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "@infergrid/runtime";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";

/**
 * A page that falls this far behind (bytes queued on its socket beyond its first, full update) is dropped; its
 * EventSource reconnects and starts afresh.
 */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

interface Asset {
  type: string;
  body: Buffer;
}

/** The page and what it loads, read once at start: served from memory. */
function loadAssets(): Map<string, Asset> {
  const here = dirname(fileURLToPath(import.meta.url));
  const staticDir = join(here, "..", "static");
  const require = createRequire(import.meta.url);
  const files: [string, string, string][] = [
    ["/", join(staticDir, "index.html"), "text/html; charset=utf-8"],
    ["/console.js", join(staticDir, "console.js"), "text/javascript; charset=utf-8"],
    ["/console.css", join(staticDir, "console.css"), "text/css; charset=utf-8"],
    ["/vendor/uPlot.iife.min.js", require.resolve("uplot/dist/uPlot.iife.min.js"), "text/javascript; charset=utf-8"],
    ["/vendor/uPlot.min.css", require.resolve("uplot/dist/uPlot.min.css"), "text/css; charset=utf-8"],
  ];
  return new Map(files.map(([path, file, type]) => [path, { type, body: readFileSync(file) }]));
}

/** One server-sent event carrying `json`, encoded once whatever the number of pages. */
const event = (json: string): Buffer => Buffer.from(`data: ${json}\n\n`);

/** The pages following the live updates: each gets every update, encoded once for all. */
export class UpdateHub {
  private readonly clients = new Set<ServerResponse>();
  /**
   * Pages whose first, full update is still queued, and its size. It is not counted against the page: a full
   * update over the limit (hours of history, many services) would otherwise have every page dropped at the next
   * update, reconnecting and dropped again for good.
   */
  private readonly firstQueued = new Map<ServerResponse, number>();

  constructor(
    private readonly maxClients: number,
    private readonly logger: Logger,
    /** Bytes written to pages (for the console's metrics). */
    private readonly onSent: (bytes: number) => void = () => {},
  ) {}

  get size(): number {
    return this.clients.size;
  }

  get full(): boolean {
    return this.clients.size >= this.maxClients;
  }

  add(res: ServerResponse, first: string): void {
    this.clients.add(res);
    res.on("close", () => {
      this.clients.delete(res);
      this.firstQueued.delete(res);
    });
    const bytes = event(first);
    this.onSent(bytes.length);
    if (!res.write(bytes)) {
      this.firstQueued.set(res, bytes.length);
      res.once("drain", () => this.firstQueued.delete(res));
    }
  }

  /** Sends one update's JSON to every page; returns the bytes of one event. */
  broadcast(json: string): number {
    const bytes = event(json);
    for (const res of this.clients) this.write(res, bytes);
    return bytes.length;
  }

  private write(res: ServerResponse, bytes: Buffer): void {
    if (res.writableLength > MAX_QUEUED_BYTES + (this.firstQueued.get(res) ?? 0)) {
      this.logger.warn({ queued: res.writableLength }, "a console page fell behind; dropped it (it reconnects)");
      this.clients.delete(res);
      this.firstQueued.delete(res);
      res.destroy();
      return;
    }
    this.onSent(bytes.length);
    res.write(bytes);
  }

  close(): void {
    for (const res of this.clients) res.end();
    this.clients.clear();
  }
}

export interface ConsoleWebOptions {
  host: string;
  port: number;
  /** When set, every request needs HTTP Basic auth with this as the password (any user name). */
  token: string | undefined;
  hub: UpdateHub;
  /** A full update (every series point kept), as JSON: what a page gets first. */
  fullUpdate: () => string;
  logger: Logger;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Whether an Authorization header carries the token (HTTP Basic, password = token), in constant time. */
export function authorized(header: string | undefined, token: string): boolean {
  if (!header?.startsWith("Basic ")) return false;
  const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const password = colon < 0 ? "" : decoded.slice(colon + 1);
  return timingSafeEqual(digest(password), digest(token));
}

/** The console's HTTP server: the page, GET /api/state (one full update) and GET /api/events (server-sent events). */
export async function startConsoleWeb(options: ConsoleWebOptions): Promise<{ address: string; close(): Promise<void> }> {
  const assets = loadAssets();
  const app = Fastify({ logger: false, connectionTimeout: 10_000, requestTimeout: 10_000 });
  const { token, hub } = options;

  if (token !== undefined) {
    app.addHook("onRequest", async (req: FastifyRequest, reply: FastifyReply) => {
      if (req.url === "/healthz") return;
      if (authorized(req.headers.authorization, token)) return;
      await reply
        .code(401)
        .header("www-authenticate", 'Basic realm="InferGrid console", charset="UTF-8"')
        .type("application/json")
        .send({
          error: { code: "UNAUTHENTICATED", message: "the console needs HTTP Basic auth: any user, the console's token as password" },
        });
    });
  }

  app.get("/healthz", async (_req, reply) => reply.type("text/plain").send("ok\n"));
  for (const [path, asset] of assets)
    app.get(path, async (_req, reply) => reply.type(asset.type).header("cache-control", "no-cache").send(asset.body));

  app.get("/api/state", async (_req, reply) =>
    reply.type("application/json").header("cache-control", "no-store").send(options.fullUpdate()),
  );

  app.get("/api/events", (req, reply) => {
    if (hub.full) {
      void reply
        .code(503)
        .header("retry-after", "5")
        .send({ error: { code: "UNAVAILABLE", message: `the console already serves ${hub.size} live pages (--max-clients)` } });
      return;
    }
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    // A page that loses the stream reconnects after this long.
    res.write("retry: 2000\n\n");
    req.raw.socket.setNoDelay(true);
    // Live streams must not be cut by the request timeout that guards the other routes.
    req.raw.setTimeout(0);
    hub.add(res, options.fullUpdate());
  });

  app.setNotFoundHandler(async (req, reply) =>
    reply.code(404).send({ error: { code: "NOT_FOUND", message: `no such page: ${req.method} ${req.url}` } }),
  );

  await app.listen({ host: options.host, port: options.port });
  const bound = app.server.address();
  const port = typeof bound === "object" && bound ? bound.port : options.port;
  return {
    address: `${options.host}:${port}`,
    close: async () => {
      hub.close();
      await app.close();
    },
  };
}
